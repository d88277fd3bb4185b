"""Each backend runs a program and returns its validated result, recording which ran."""

import os

import pytest

from runner.sandbox.backends.base import SandboxUnavailable
from runner.sandbox.run import choose_backend, run_script
from tests.sandbox.helpers import (
    FAST,
    assert_nothing_left,
    backend_param,
    metrics,
    program,
    report,
    require,
)

ALL = [backend_param("docker"), backend_param("bwrap"), backend_param("process")]


@pytest.fixture(autouse=True)
def _allow_process(monkeypatch):
    monkeypatch.setenv("OVERLAP_SANDBOX_ALLOW_PROCESS", "1")


@pytest.mark.parametrize("backend", ALL)
def test_a_program_runs_and_its_result_names_the_backend(backend):
    require(backend)
    code = program("print('hello from the run', file=sys.stderr)\n" + report("pass", answer=6 * 7))
    result = run_script(code, backend=backend, limits=FAST)
    assert result["status"] == "pass", result
    assert metrics(result)["answer"] == 42
    assert result["sandbox"]["backend"] == backend
    assert result["sandbox"]["isolated"] is (backend != "process")
    assert_nothing_left(backend)


@pytest.mark.parametrize("backend", ALL)
def test_the_run_sees_none_of_the_workers_environment(backend, monkeypatch):
    require(backend)
    monkeypatch.setenv("OVERLAP_TEST_SECRET", "hunter2-worker-secret")
    code = program(report(env="sorted(os.environ)", secret="os.environ.get('OVERLAP_TEST_SECRET')"))
    result = run_script(code, backend=backend, limits=FAST)
    assert metrics(result)["secret"] is None
    assert "hunter2-worker-secret" not in str(result)
    assert "DJANGO_SETTINGS_MODULE" not in metrics(result)["env"]


@pytest.mark.parametrize("backend", ALL)
def test_an_exception_is_a_crash_with_the_traceback(backend):
    require(backend)
    result = run_script("raise ValueError('boom in candidate')\n", backend=backend, limits=FAST)
    assert result["verdict"] == "crash"
    assert result["status"] == "error"
    assert "ValueError: boom in candidate" in result["stderr"]
    assert "exited with status 1" in result["message"]


@pytest.mark.parametrize("backend", ALL)
def test_a_program_that_prints_no_result_is_a_crash_not_a_pass(backend):
    require(backend)
    result = run_script("print('all tests passed')\n", backend=backend, limits=FAST)
    assert result["verdict"] == "crash"
    assert "all tests passed" in result["stdout"]


def test_the_process_backend_says_it_is_not_isolated():
    result = run_script(program(report("pass")), backend="process", limits=FAST)
    assert result["sandbox"]["isolated"] is False
    assert "does not isolate" in result["sandbox"]["warning"]


def test_auto_never_picks_the_process_backend_unless_allowed(monkeypatch):
    from runner.sandbox import run

    monkeypatch.delenv("OVERLAP_SANDBOX_ALLOW_PROCESS")
    for name in ("docker", "bwrap"):
        monkeypatch.setattr(run.get_backend(name), "problem", lambda: "not on this host")
    with pytest.raises(SandboxUnavailable, match="OVERLAP_SANDBOX_ALLOW_PROCESS"):
        choose_backend("auto")
    assert choose_backend("auto", allow_unisolated=True).name == "process"


def test_auto_prefers_docker_then_bwrap(monkeypatch):
    from runner.sandbox import run

    monkeypatch.setattr(run.get_backend("docker"), "problem", lambda: None)
    assert choose_backend("auto").name == "docker"
    monkeypatch.setattr(run.get_backend("docker"), "problem", lambda: "no engine")
    monkeypatch.setattr(run.get_backend("bwrap"), "problem", lambda: None)
    assert choose_backend("auto").name == "bwrap"


def test_naming_an_unusable_backend_says_why(monkeypatch):
    from runner.sandbox import run

    monkeypatch.setattr(run.get_backend("bwrap"), "problem", lambda: "bubblewrap is missing")
    with pytest.raises(SandboxUnavailable, match="bubblewrap is missing"):
        choose_backend("bwrap")


@pytest.mark.parametrize("backend", [backend_param("docker"), backend_param("bwrap")])
def test_a_warm_sandbox_serves_the_next_job_docker_only(backend):
    require(backend)
    from runner.sandbox.limits import Limits
    from runner.sandbox.pool import start_pool, stop_pool

    limits = Limits.from_mapping(FAST)
    pool = start_pool(backend, size=1, limits=limits)
    try:
        assert pool.wait_full(120), "the pool never became ready"
        code = program(report("pass", pid="os.getpid()", torch="'torch' in sys.modules"))
        first = run_script(code, backend=backend, limits=limits)
        assert first["sandbox"]["pooled"] is True
        assert metrics(first)["torch"] is True  # imported while the sandbox waited
        assert pool.wait_full(120)
        second = run_script(code, backend=backend, limits=limits)
        assert second["sandbox"]["pooled"] is True
        # docker: the same sandbox, reset, ran the second job; bwrap: a fresh one
        assert second["sandbox"]["served_before"] == (1 if backend == "docker" else 0)
        assert metrics(second)["torch"] is True
        other = run_script(code, backend=backend, limits=dict(FAST, memory_mib=300))
        assert other["sandbox"]["pooled"] is False  # other limits: a cold sandbox
    finally:
        stop_pool()
    assert_nothing_left(backend)


LEAVE_BEHIND = program(
    "import ctypes\n"
    "open('/tmp/left-behind', 'w').write('the first candidate')\n"
    "os.makedirs('/tmp/locked/inner'); os.chmod('/tmp/locked', 0o500)\n"
    "open('/dev/shm/left-behind', 'w').write('the first candidate')\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "shm = libc.shmget(0x0F1A, 4096, 0o1666)\n"
    "msg = libc.msgget(0x0F1B, 0o1666)\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    os.setsid()\n"
    "    if os.fork() == 0:\n"
    "        time.sleep(600)\n"
    "    os._exit(0)\n"
    "os.waitpid(pid, 0)\n"
    + report("pass", shm="shm", msg="msg")
)
LOOK_AROUND = program(
    "def rows(name):\n"
    "    with open('/proc/sysvipc/' + name) as f:\n"
    "        return len(f.read().splitlines()) - 1\n"
    "others = [p for p in os.listdir('/proc') if p.isdigit() and int(p) not in "
    "(1, os.getpid())]\n"
    + report(
        "pass",
        tmp="sorted(os.listdir('/tmp'))",
        shm_files="sorted(os.listdir('/dev/shm'))",
        shm="rows('shm')",
        msg="rows('msg')",
        others="others",
    )
)


@pytest.mark.docker
def test_nothing_of_a_job_reaches_the_next_one_in_a_served_sandbox():
    """A docker sandbox serves several jobs; what a job leaves — files in /tmp and
    /dev/shm (read-only folders too), System V IPC objects, a setsid daemon — is gone
    before the next job starts, and a job that hits a limit is never followed by another."""
    require("docker")
    from runner.sandbox.limits import Limits
    from runner.sandbox.pool import start_pool, stop_pool

    limits = Limits.from_mapping(FAST)
    pool = start_pool("docker", size=1, limits=limits)
    try:
        assert pool.wait_full(120), "the pool never became ready"
        first = run_script(LEAVE_BEHIND, backend="docker", limits=limits)
        assert first["status"] == "pass", first
        assert metrics(first)["shm"] >= 0 and metrics(first)["msg"] >= 0  # they were made
        second = run_script(LOOK_AROUND, backend="docker", limits=limits)
        assert second["sandbox"]["served_before"] == first["sandbox"]["served_before"] + 1
        seen = metrics(second)
        # /tmp holds only the second job's own folder
        assert seen["tmp"] == ["job"] and seen["shm_files"] == [], seen
        assert seen["shm"] == 0 and seen["msg"] == 0, seen
        # PID 1 and this job only (its parent is PID 1's fork: the job's own process)
        assert len(seen["others"]) <= 1, seen
        noisy = program("sys.stdout.write('x' * (8 << 20))\n")
        over = run_script(noisy, backend="docker", limits=limits)
        assert over["sandbox"]["served_before"] >= 2
        assert pool.wait_full(120)
        after = run_script(LOOK_AROUND, backend="docker", limits=limits)
        assert after["sandbox"]["served_before"] == 0  # a fresh sandbox after the limit
    finally:
        stop_pool()
    assert_nothing_left("docker")


POISON_PID_1 = program(
    "import resource, signal\n"
    "done = []\n"
    "def attempt(name, call):\n"
    "    try:\n"
    "        call()\n"
    "        done.append(name)\n"
    "    except OSError:\n"
    "        pass\n"
    "attempt('nofile', lambda: resource.prlimit(1, resource.RLIMIT_NOFILE, (64, 64)))\n"
    "attempt('nproc', lambda: resource.prlimit(1, resource.RLIMIT_NPROC, (8, 8)))\n"
    "attempt('as', lambda: resource.prlimit(1, resource.RLIMIT_AS, (1 << 26, 1 << 26)))\n"
    "attempt('nice', lambda: os.setpriority(os.PRIO_PROCESS, 1, 19))\n"
    "attempt('idle', lambda: os.sched_setscheduler(1, os.SCHED_IDLE, os.sched_param(0)))\n"
    "attempt('affinity', lambda: os.sched_setaffinity(1, {min(os.sched_getaffinity(0))}))\n"
    "attempt('sigint', lambda: os.kill(1, signal.SIGINT))\n"
    "attempt('sigterm', lambda: os.kill(1, signal.SIGTERM))\n"
    "attempt('oom', lambda: open('/proc/1/oom_score_adj', 'w').write('1000'))\n"
    "attempt('link', lambda: os.symlink('/', '/tmp/root-link'))\n"
    "attempt('nested', lambda: (os.makedirs('/tmp/d'), os.symlink('/proc', '/tmp/d/p')))\n"
    "time.sleep(0.2)\n"
    + report("pass", done="done", uid="os.getuid()")
)
DEFAULTS = program(
    "import resource\n"
    + report(
        "pass",
        nofile="resource.getrlimit(resource.RLIMIT_NOFILE)[0]",
        nice="os.getpriority(os.PRIO_PROCESS, 0)",
        cpus="len(os.sched_getaffinity(0))",
        tmp="sorted(os.listdir('/tmp'))",
    )
)


@pytest.mark.docker
def test_a_job_that_attacks_pid_1_is_refused_and_the_next_job_gets_the_defaults():
    """A job tries to lower PID 1's limits, renice it, make it SCHED_IDLE, pin it to one
    CPU, signal it and raise its OOM score, and leaves links in /tmp. It runs under the
    candidate's own uid, so the kernel refuses everything that touches PID 1; its own
    result is its own (no sandbox_error), and the next job, through the pool of one,
    runs with the limits, priority, CPUs and empty /tmp a fresh sandbox gives."""
    require("docker")
    from runner.privileges import DEFAULT_CANDIDATE_UID
    from runner.sandbox.limits import Limits
    from runner.sandbox.pool import start_pool, stop_pool

    limits = Limits.from_mapping(FAST)
    fresh = metrics(run_script(DEFAULTS, backend="docker", limits=limits))
    pool = start_pool("docker", size=1, limits=limits)
    try:
        assert pool.wait_full(120), "the pool never became ready"
        attack = run_script(POISON_PID_1, backend="docker", limits=limits)
        assert attack["status"] == "pass", attack
        assert attack["verdict"] not in ("sandbox_error", "internal_error")
        seen = metrics(attack)
        assert seen["uid"] == DEFAULT_CANDIDATE_UID
        assert sorted(seen["done"]) == ["link", "nested"], seen  # /tmp is the job's to use
        assert pool.wait_full(120)
        after = run_script(DEFAULTS, backend="docker", limits=limits)
        assert after["status"] == "pass", after
        assert after["sandbox"]["served_before"] >= 1  # the same sandbox, reset
        seen = metrics(after)
        assert (seen["nofile"], seen["nice"], seen["cpus"]) == (
            fresh["nofile"], fresh["nice"], fresh["cpus"]), (seen, fresh)
        assert seen["tmp"] == fresh["tmp"] == ["job"], (seen, fresh)
    finally:
        stop_pool()
    assert_nothing_left("docker")


@pytest.mark.parametrize("backend", [backend_param("docker"), backend_param("bwrap")])
def test_a_killed_worker_leaves_nothing_after_the_reaper(backend, tmp_path):
    """A worker SIGKILLed mid-run: its sandbox dies or is reaped at the next start."""
    require(backend)
    import signal
    import subprocess
    import sys

    from runner.sandbox.run import get_backend

    marker = f"sleep {os.getpid() % 1000 + 7001}"
    worker = tmp_path / "worker.py"
    worker.write_text(
        "import sys\n"
        "from runner.sandbox.run import run_script\n"
        f'run_script(\'import os; os.execv("/bin/sh", ["sh", "-c", "{marker}"])\','
        f" backend={backend!r}, limits={{'wall_s': 60}})\n"
    )
    env = dict(os.environ, PYTHONPATH=os.getcwd(), OVERLAP_SANDBOX_OWNER="killed-worker-test")
    proc = subprocess.Popen([sys.executable, str(worker)], env=env)
    from tests.sandbox.helpers import host_processes_matching, wait_until

    assert wait_until(lambda: host_processes_matching(marker), 60), "the run never started"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    os.environ["OVERLAP_SANDBOX_OWNER"] = "killed-worker-test"
    try:
        get_backend(backend).reap()
    finally:
        del os.environ["OVERLAP_SANDBOX_OWNER"]
    assert_nothing_left(backend, marker)


@pytest.mark.docker
def test_two_workers_on_one_host_never_reap_each_others_sandboxes(tmp_path):
    """Another live worker's containers (its warm pool, its runs) survive this worker's
    start-up reaper; once that worker is SIGKILLed, its containers are reaped."""
    require("docker")
    import signal
    import subprocess
    import sys

    from runner.sandbox.backends.docker import LABEL
    from runner.sandbox.run import get_backend
    from tests.sandbox.helpers import wait_until

    other = tmp_path / "other_worker.py"
    other.write_text(
        "import time\n"
        "from runner.sandbox.pool import start_pool\n"
        "pool = start_pool('docker', size=1)\n"
        "assert pool.wait_full(120)\n"
        "print('ready', flush=True)\n"
        "time.sleep(600)\n"
    )
    # Same host, same owner (the hostname): only the process tells the two workers apart.
    env = {k: v for k, v in os.environ.items() if k != "OVERLAP_SANDBOX_OWNER"}
    env["PYTHONPATH"] = os.getcwd()
    proc = subprocess.Popen([sys.executable, str(other)], env=env, stdout=subprocess.PIPE,
                            text=True)
    api = get_backend("docker").client().api

    def theirs() -> list[str]:
        return [c["Id"] for c in api.containers(filters={"label": f"{LABEL}.process"})
                if c["Labels"].get(f"{LABEL}.process", "").startswith(f"{proc.pid}:")]

    try:
        assert proc.stdout.readline().strip() == "ready"
        started = theirs()
        assert len(started) == 1
        get_backend("docker").reap()  # this worker starting
        assert theirs() == started, "a live worker's warm sandbox was destroyed"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    get_backend("docker").reap()  # the next start after that worker died
    assert wait_until(lambda: not theirs(), 30), "the dead worker's sandbox was left behind"


@pytest.mark.docker
def test_a_worker_that_exits_takes_its_warm_sandboxes_with_it(tmp_path):
    """A worker that shuts down cleanly (stop_pool at exit) leaves no container behind for
    the next start's reaper: removal waits, it is not left to a thread that dies with it."""
    require("docker")
    import subprocess
    import sys

    from runner.sandbox.backends.docker import LABEL
    from runner.sandbox.run import get_backend

    worker = tmp_path / "worker.py"
    worker.write_text(
        "import os\n"
        "from runner.sandbox.pool import start_pool\n"
        "pool = start_pool('docker', size=2)\n"
        "assert pool.wait_full(120)\n"
        "print(os.getpid(), flush=True)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    done = subprocess.run([sys.executable, str(worker)], env=env, capture_output=True,
                          text=True, timeout=180, check=True)
    pid = done.stdout.strip()
    api = get_backend("docker").client().api
    left = [c["Id"] for c in api.containers(all=True, filters={"label": f"{LABEL}.process"})
            if c["Labels"].get(f"{LABEL}.process", "").startswith(f"{pid}:")]
    assert left == []


@pytest.mark.docker
def test_threads_asking_at_once_all_hear_that_the_engine_is_there():
    """A Celery pool process starts its warm pool while its heartbeat asks the same: each
    must hear the engine's real state, not "not checked" (which silently left half the
    pool processes without warm sandboxes)."""
    require("docker")
    from concurrent.futures import ThreadPoolExecutor

    from runner.sandbox.backends.docker import DockerBackend

    backend = DockerBackend()
    with ThreadPoolExecutor(8) as threads:
        answers = list(threads.map(lambda _: backend.problem(), range(8)))
    assert answers == [None] * 8


def test_a_forked_process_builds_its_own_engine_clients():
    from runner.sandbox import choice

    choice.get_backend("process")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(write, b"1" if choice._instances else b"0")
        os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(read, 1) == b"0"
    assert "process" in choice._instances  # the parent keeps its own
