"""The sandbox's first process: takes one job on stdin, runs it, reports on stdout.

Runs inside every sandbox (docker, bwrap, process) as ``python -I -m runner.sandbox.inside``.
Standard library only (and runner.forkserver, which is too): it starts before anything
else is imported.

Protocol (host -> sandbox, on stdin): one line holding the payload's length in bytes, then
the payload, a JSON object::

    {"nonce": str, "files": {relpath: base64}, "workdir": "/tmp/job",
     "entry": {"module": "runner", "argv": [...]} | {"script": relpath, "argv": [...]},
     "env": {str: str}, "wall_s": float (CPU seconds of work), "stall_s": float,
     "backstop_s": float, "stdout_bytes": int, "stderr_bytes": int,
     "rlimits": {"NOFILE": int, "FSIZE": int, ...}}

Protocol (sandbox -> host, on stdout): one line, a JSON object (the envelope)::

    {"nonce", "exit_code", "signal", "grading_s", "stdout", "stderr", "stdout_bytes",
     "stderr_bytes", "limit": null | "timeout" | "output_limit",
     "timeout": null | "cpu" | "stall" | "wall", "oom_kills",
     "pids_max_events", "tmp_free_bytes", "error", "serving"}

With ``--serve N`` (pooled docker sandboxes) this process runs up to N jobs one after the
other: after a job that ended cleanly it kills whatever the job left, wipes every writable
folder and System V IPC object (``reset_between_jobs``) and says ``"serving": true``, then
waits for the next job; otherwise it says false and exits.

The job runs in a forked child, so modules preloaded here (torch) are not imported again:
that is what a warm pool buys. The child's stdout and stderr are pipes read here, bounded;
the child never holds this process's stdout, so nothing it prints reaches the host except
inside the envelope, as data. This process makes itself non-dumpable (the child, same uid,
cannot ptrace it or open its /proc files), and as PID 1 of a pid namespace it cannot be
killed from inside; when it exits, the kernel kills everything left in the namespace.
"""

import base64
import contextlib
import ctypes
import json
import os
import resource
import select
import signal
import sys
import time

from runner import privileges
from runner.forkserver import (
    PR_SET_CHILD_SUBREAPER,
    PR_SET_DUMPABLE,
    PR_SET_PDEATHSIG,
    close_descriptors,
    prctl,
)

PROTOCOL = 1
MAX_JOB_BYTES = 32 * 1024 * 1024
READ_CHUNK = 65536
DRAIN_AFTER_EXIT_S = 0.2


def _prctl_dumpable(value: int) -> None:
    prctl(PR_SET_DUMPABLE, value)


def _read_exact(fd: int, count: int, deadline: float | None) -> bytes:
    chunks = []
    while count > 0:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise TimeoutError("no job arrived")
        chunk = os.read(fd, min(count, READ_CHUNK))
        if not chunk:
            raise EOFError("stdin closed before the job was complete")
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)


def read_job(fd: int, idle_timeout_s: float | None) -> dict:
    deadline = time.monotonic() + idle_timeout_s if idle_timeout_s else None
    header = b""
    while not header.endswith(b"\n"):
        header += _read_exact(fd, 1, deadline)
        if len(header) > 20:
            raise ValueError("bad job header")
    length = int(header)
    if not 0 < length <= MAX_JOB_BYTES:
        raise ValueError(f"job of {length} bytes refused")
    return json.loads(_read_exact(fd, length, None))


def _safe_relpath(relpath: str) -> str:
    parts = relpath.split("/")
    if relpath.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"bad path in job: {relpath!r}")
    return os.path.join(*parts)


def write_files(workdir: str, files: dict) -> None:
    """Write the job's files, then make them read-only (a first guard; see the README)."""
    os.makedirs(workdir, mode=0o755, exist_ok=True)
    for relpath, data in files.items():
        path = os.path.join(workdir, _safe_relpath(relpath))
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o444)
        with os.fdopen(fd, "wb") as handle:
            handle.write(base64.b64decode(data))
    for root, dirs, _files in os.walk(workdir):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o555)
    os.chmod(workdir, 0o555)


def apply_rlimits(rlimits: dict) -> None:
    """Lower (never raise) this process's limits; the child inherits them."""
    for name, value in rlimits.items():
        res = getattr(resource, "RLIMIT_" + name)
        _soft, hard = resource.getrlimit(res)
        value = int(value)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(res, (value, value))


def _run_child(job: dict, out_w: int, err_w: int, keep_fd: int | None) -> None:
    """In the forked child: become an ordinary process, then run the entry. Never returns."""
    code = 1
    try:
        os.setpgid(0, 0)
        if job.get("as_candidate"):
            privileges.become_candidate()  # a script job: the entry is the candidate's code
        _prctl_dumpable(1)
        with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as adj:
            adj.write("1000")  # under memory pressure, the job dies before this process
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_DFL)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        close_descriptors(keep=keep_fd)  # keep: the fork server started for it (_prestart)
        apply_rlimits(job.get("rlimits", {}))
        os.environ.clear()
        os.environ.update(job.get("env", {}))
        os.chdir(job["workdir"])
        sys.stdin = open(0, closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
        code = _run_entry(job)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code & 0xFF)


def _run_entry(job: dict) -> int:
    import runpy

    entry = job["entry"]
    argv = [arg.replace("{workdir}", job["workdir"]) for arg in entry.get("argv", [])]
    if "module" in entry:
        sys.argv = [entry["module"], *argv]
        runpy.run_module(entry["module"], run_name="__main__", alter_sys=True)
    else:
        script = os.path.join(job["workdir"], _safe_relpath(entry["script"]))
        sys.argv = [script, *argv]
        sys.path.insert(0, os.path.dirname(script))
        runpy.run_path(script, run_name="__main__")
    return 0


class _Capture:
    """One bounded pipe reader: keeps the first `cap` bytes, counts them all."""

    def __init__(self, fd: int, cap: int):
        self.fd = fd
        self.cap = cap
        self.kept = bytearray()
        self.total = 0
        self.open = True

    def read(self) -> None:
        try:
            chunk = os.read(self.fd, READ_CHUNK)
        except BlockingIOError:
            return
        if not chunk:
            self.open = False
            return
        self.total += len(chunk)
        room = self.cap - len(self.kept)
        if room > 0:
            self.kept += chunk[:room]

    @property
    def over(self) -> bool:
        return self.total > self.cap

    def text(self) -> str:
        return bytes(self.kept).decode("utf-8", errors="replace")


def _kill_everything(child_pid: int, status: dict) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child_pid, signal.SIGKILL)
    if os.getpid() == 1:
        # PID 1 of a pid namespace: -1 reaches every other process in it (setsid daemons
        # included) and never this one. Outside a namespace this would hit the whole host.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(-1, signal.SIGKILL)
        return
    # Not PID 1 (the process backend): this process is a child subreaper, so orphans of
    # the run, setsid daemons too, become its children; kill those until none is left.
    for _ in range(1000):
        children = _children()
        if not children:
            return
        for pid in children:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        _reap(child_pid, status)
        time.sleep(0.002)


def _children() -> list[int]:
    me = os.getpid()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            with open(f"/proc/{name}/stat") as handle:
                fields = handle.read().rpartition(")")[2].split()
            if int(fields[1]) == me:
                found.append(int(name))
    return found


def _reap(child_pid: int, status: dict) -> None:
    """Reap every exited process (PID 1 adopts orphans); record the child's status."""
    while True:
        try:
            pid, raw = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid == child_pid:
            status["raw"] = raw


class _Work:
    """CPU seconds the job's processes used: the live ones (every descendant of this
    process, from /proc) plus the ones already reaped. The job's limits count this, not
    real time: a busy machine slows a run down, it does not change what it used."""

    EVERY_S = 0.25  # how often /proc is read

    def __init__(self, stall_s: float) -> None:
        self.tick = os.sysconf("SC_CLK_TCK")
        self.stall_s = stall_s
        self.used = 0.0
        self.progress_at = time.monotonic()
        self.read_at = 0.0

    def _live(self) -> float:
        me = os.getpid()
        parents: dict[int, int] = {}
        cpu: dict[int, float] = {}
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            with contextlib.suppress(OSError, ValueError, IndexError):
                with open(f"/proc/{name}/stat") as handle:
                    fields = handle.read().rpartition(")")[2].split()
                parents[int(name)] = int(fields[1])
                cpu[int(name)] = (int(fields[11]) + int(fields[12])) / self.tick
        total = 0.0
        for pid, seconds in cpu.items():
            seen, parent = 0, parents.get(pid)
            while parent is not None and parent != me and seen < 64:
                parent, seen = parents.get(parent), seen + 1
            if parent == me:
                total += seconds
        return total

    def update(self, now: float) -> None:
        if now - self.read_at < self.EVERY_S:
            return
        self.read_at = now
        times = os.times()
        used = self._live() + times.children_user + times.children_system
        if used > self.used + 1e-9:
            self.used, self.progress_at = used, now

    def stalled(self, now: float) -> bool:
        return now - self.progress_at > self.stall_s


def supervise(job: dict, child_pid: int, out: _Capture, err: _Capture) -> dict:
    """Run the job to its end, or to a limit: its CPU budget (``wall_s``: work, not
    waiting), no CPU used by any of its processes for ``stall_s`` (blocked), or the
    real-time backstop (an overloaded host)."""
    started = time.monotonic()
    budget = float(job["wall_s"])
    backstop = started + float(job.get("backstop_s", budget))
    work = _Work(float(job.get("stall_s", budget)))
    base = os.times()
    base_cpu = base.children_user + base.children_system  # earlier jobs' (a pooled sandbox)
    status: dict = {}
    limit = why = None
    exited_at = None
    for capture in (out, err):
        os.set_blocking(capture.fd, False)
    while True:
        _reap(child_pid, status)
        now = time.monotonic()
        if "raw" in status and exited_at is None:
            exited_at = now
        open_fds = [c.fd for c in (out, err) if c.open]
        if not open_fds or (exited_at is not None and now - exited_at > DRAIN_AFTER_EXIT_S):
            break  # a daemon holding the pipes open does not keep the run going
        work.update(now)
        if work.used - base_cpu > budget:
            limit, why = "timeout", "cpu"
        elif exited_at is None and work.stalled(now):
            limit, why = "timeout", "stall"
        elif now >= backstop:
            limit, why = "timeout", "wall"
        if limit:
            break
        ready, _, _ = select.select(open_fds, [], [], min(0.05, backstop - now))
        for capture in (out, err):
            if capture.fd in ready:
                capture.read()
        if out.over or err.over:
            limit = "output_limit"
            break
    _kill_everything(child_pid, status)
    if "raw" not in status:
        with contextlib.suppress(ChildProcessError):
            _, raw = os.waitpid(child_pid, 0)
            status["raw"] = raw
    _reap(child_pid, status)
    return {"raw": status.get("raw"), "limit": limit, "timeout": why}


def _cgroup_counter(paths: list[str], key: str) -> int | None:
    for path in paths:
        with contextlib.suppress(OSError, ValueError), open(path) as handle:
            for line in handle:
                name, _, value = line.partition(" ")
                if name == key:
                    return int(value)
    return None


def _tmp_free_bytes(path: str) -> int | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


OOM_COUNTERS = ["/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"]
PIDS_COUNTERS = ["/sys/fs/cgroup/pids.events", "/sys/fs/cgroup/pids/pids.events"]


def _since(before: int | None, after: int | None) -> int | None:
    """A cgroup counter's growth during one job (the counters outlive the job when the
    sandbox serves several)."""
    if after is None:
        return None
    return after - (before or 0)


def run_job(job: dict, keep_fd: int | None = None) -> dict:
    oom_before = _cgroup_counter(OOM_COUNTERS, "oom_kill")
    pids_before = _cgroup_counter(PIDS_COUNTERS, "max")
    write_files(job["workdir"], job.get("files", {}))
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    started = time.monotonic()
    child_pid = os.fork()
    if child_pid == 0:
        os.close(out_r)
        os.close(err_r)
        _run_child(job, out_w, err_w, keep_fd)
    os.close(out_w)
    os.close(err_w)
    out = _Capture(out_r, int(job["stdout_bytes"]))
    err = _Capture(err_r, int(job["stderr_bytes"]))
    outcome = supervise(job, child_pid, out, err)
    grading_s = time.monotonic() - started
    os.close(out_r)
    os.close(err_r)
    raw = outcome["raw"]
    exit_code = os.WEXITSTATUS(raw) if raw is not None and os.WIFEXITED(raw) else None
    sig = os.WTERMSIG(raw) if raw is not None and os.WIFSIGNALED(raw) else None
    return {
        "exit_code": exit_code,
        "signal": sig,
        "grading_s": round(grading_s, 6),
        "stdout": out.text(),
        "stderr": err.text(),
        "stdout_bytes": out.total,
        "stderr_bytes": err.total,
        "limit": outcome["limit"],
        "timeout": outcome["timeout"],
        "oom_kills": _since(oom_before, _cgroup_counter(OOM_COUNTERS, "oom_kill")),
        "pids_max_events": _since(pids_before, _cgroup_counter(PIDS_COUNTERS, "max")),
        "tmp_free_bytes": _tmp_free_bytes(job.get("tmp_dir", "/tmp")),
        "error": None,
    }


# -- serving several jobs (a pooled docker sandbox) -------------------------------------
#
# Between two jobs nothing of the first may reach the second: every process of the job is
# already killed (``_kill_everything``: as PID 1, kill(-1)); what could outlive them is
# wiped here, or the sandbox stops serving (the host then destroys it). The root file
# system is read-only; what is writable is listed in WRITABLE. System V IPC objects live
# in the sandbox's own IPC namespace until removed.

WRITABLE = ("/tmp", "/dev/shm", "/dev/mqueue")
IPC_RMID = 0
SYSV_IPC = (("/proc/sysvipc/shm", "shmctl"), ("/proc/sysvipc/msg", "msgctl"),
            ("/proc/sysvipc/sem", "semctl"))


def _wipe(folder: str, strict: bool = True) -> None:
    """Remove everything inside ``folder`` (the folder itself stays). A link is removed,
    never followed (a job may leave one pointing anywhere). Not ``strict``: remove what
    this process may, skip the rest (the candidate's pass, see reset_between_jobs)."""
    import shutil

    if not os.path.isdir(folder):
        return
    for root, dirs, _files in os.walk(folder):
        for name in dirs:  # jobs leave read-only folders (write_files): make them writable
            path = os.path.join(root, name)
            if os.path.islink(path):
                continue
            with contextlib.suppress(OSError):
                os.chmod(path, 0o700)
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=not strict)
            else:
                os.unlink(path)
        except OSError:
            if strict:
                raise


def _remove_sysv_ipc(strict: bool = True) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    for listing, call in SYSV_IPC:
        if not os.path.exists(listing):
            continue
        with open(listing) as handle:
            rows = handle.read().splitlines()[1:]
        for row in rows:
            ipc_id = int(row.split()[1])
            if call == "semctl":
                result = libc.semctl(ipc_id, 0, IPC_RMID)
            else:
                result = getattr(libc, call)(ipc_id, IPC_RMID, None)
            if result != 0 and strict:
                raise OSError(ctypes.get_errno(), f"{call}({ipc_id}, IPC_RMID) failed")


def _clear(folders: list[str], strict: bool = True) -> None:
    for folder in folders:
        _wipe(folder, strict)
    _remove_sysv_ipc(strict)


def _as_candidate(work, *args) -> None:
    """Run ``work(*args)`` in a child under the candidate's uid, ignoring what it cannot
    do. This process keeps only CAP_SETUID, CAP_SETGID and CAP_KILL: files and System V
    objects the candidate's processes created are theirs to remove (a sticky /tmp, their
    own folders), not this process's."""
    pid = os.fork()
    if pid == 0:
        try:
            privileges.become_candidate()
            with contextlib.suppress(Exception):
                work(*args)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def _others_alive() -> bool:
    """Any process in this sandbox but this one (PID 1 sees its whole namespace)."""
    me = str(os.getpid())
    return any(name.isdigit() and name != me for name in os.listdir("/proc"))


def own_attributes() -> dict:
    """What a job could change of this process through its shared uid (prlimit, renice,
    sched_setscheduler, sched_setaffinity, oom_score_adj) and every later job would
    inherit: recorded at start, compared after each job."""
    found: dict = {"rlimits": {}}
    for name in dir(resource):
        if name.startswith("RLIMIT_"):
            with contextlib.suppress(OSError, ValueError):
                found["rlimits"][name] = resource.getrlimit(getattr(resource, name))
    with contextlib.suppress(OSError):
        found["nice"] = os.getpriority(os.PRIO_PROCESS, 0)
    with contextlib.suppress(OSError, AttributeError):
        found["scheduler"] = os.sched_getscheduler(0)
    with contextlib.suppress(OSError, AttributeError):
        found["affinity"] = sorted(os.sched_getaffinity(0))
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj") as handle:
        found["oom_score_adj"] = handle.read().strip()
    return found


START_ATTRIBUTES: dict = {}


def reset_between_jobs(job: dict) -> bool:
    """Leave nothing of the job behind; False when that cannot be made sure of (then this
    sandbox serves no other job: the pool replaces it)."""
    if os.getpid() != 1:
        return False  # only PID 1 of its own namespace can know every process is gone
    if START_ATTRIBUTES and own_attributes() != START_ATTRIBUTES:
        return False  # the job changed this process's limits, priority or placement
    try:
        deadline = time.monotonic() + 2.0
        while _others_alive():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(-1, signal.SIGKILL)
            _reap(-1, {})
            if time.monotonic() > deadline:
                return False
            time.sleep(0.001)
        folders = sorted({*WRITABLE, job.get("tmp_dir", "/tmp")})
        if privileges.can_switch():
            _as_candidate(_clear, folders, False)  # what the candidate's processes made is theirs
        _clear(folders)
    except Exception:  # whatever a job left that the reset cannot handle: not reused
        return False
    return True


def clean_end(envelope: dict) -> bool:
    """Whether a job ended in a way that leaves the sandbox fit for another one."""
    return (
        envelope.get("error") is None
        and envelope.get("limit") is None
        and envelope.get("exit_code") == 0
        and not envelope.get("oom_kills")
        and not envelope.get("pids_max_events")
    )


def _write_envelope(envelope: dict) -> None:
    data = (json.dumps(envelope, ensure_ascii=True) + "\n").encode()
    view = memoryview(data)
    while view:
        view = view[os.write(1, view) :]


def _prestart(preload: list[str]) -> int | None:
    """With the grading engine preloaded, start the candidates' fork server the next job
    will use now, while nobody waits (runner.sim.host.prestart_fork_server); the descriptor
    the job keeps. None (the job starts its own) if that cannot be done."""
    if "runner.cli" not in preload or "runner.sim.host" not in sys.modules:
        return None
    try:
        return sys.modules["runner.sim.host"].prestart_fork_server()
    except Exception:
        return None


def main(argv: list[str]) -> int:
    # The working folder (/tmp) is the run's to write: never import from it.
    sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd())]
    _prctl_dumpable(0)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    if os.getpid() == 1:
        # The kernel delivers a signal from inside the namespace to its PID 1 only when
        # PID 1 handles it: with the defaults, a job's SIGINT or SIGTERM is dropped (Python
        # would otherwise raise KeyboardInterrupt here and end the sandbox).
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1,
                    signal.SIGUSR2, signal.SIGQUIT):
            signal.signal(sig, signal.SIG_DFL)
    START_ATTRIBUTES.update(own_attributes())
    preload = []
    idle_timeout_s = None
    announce = False
    max_jobs = 1  # jobs this sandbox runs, one after the other (--serve N)
    args = list(argv)
    while args:
        flag = args.pop(0)
        if flag == "--preload":
            preload = [name for name in args.pop(0).split(",") if name]
        elif flag == "--idle-timeout":
            idle_timeout_s = float(args.pop(0))
        elif flag == "--serve":
            max_jobs = max(1, int(args.pop(0)))
        elif flag == "--announce":
            announce = True
        elif flag == "--die-with-parent":
            parent = os.getppid()
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != parent:
                return 0
    if os.getpid() != 1:
        prctl(PR_SET_CHILD_SUBREAPER, 1)
    for name in preload:
        with contextlib.suppress(Exception):
            __import__(name)
    keep_fd = _prestart(preload)
    if announce:
        os.write(2, b"ready\n")
    served = 0
    while True:
        nonce = None
        job: dict = {}
        try:
            job = read_job(0, idle_timeout_s)
            nonce = job.get("nonce")
            if job.get("protocol", PROTOCOL) != PROTOCOL:
                raise ValueError("protocol mismatch")
            envelope = run_job(job, keep_fd)
        except (TimeoutError, EOFError):
            os._exit(0)  # an idle pooled sandbox, or a host that went away: nothing to report
        except Exception as exc:
            envelope = {"error": f"{type(exc).__name__}: {exc}"}
        served += 1
        # Another job only after a clean end and a complete reset; the host reads
        # "serving" to know whether it may send one.
        serving = served < max_jobs and clean_end(envelope) and reset_between_jobs(job)
        envelope["nonce"] = nonce
        envelope["protocol"] = PROTOCOL
        envelope["serving"] = serving
        _write_envelope(envelope)
        if not serving:
            break
        keep_fd = _prestart(preload)  # the last job's server died with the rest of it
    # No interpreter teardown: with torch imported it takes about a second, and the host
    # is waiting for this process to end.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
