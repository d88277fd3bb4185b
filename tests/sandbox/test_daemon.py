"""The sandbox daemon: a worker without the Docker socket grades through it, and nothing
it accepts lets a caller choose what a container may be (mounts, image, privileges)."""

import base64
import json
import os
import socket
import stat
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runner.sandbox.backends.base import SandboxUnavailable
from runner.sandbox.daemon import Refused, job_from_request, job_request
from runner.sandbox.job import grade_job, script_job
from runner.sandbox.limits import Limits
from runner.sandbox.run import choose_backend, get_backend, grade, run_script
from tests.sandbox.helpers import FAST, program, report

ROOT = Path(__file__).resolve().parents[2]
EXERCISE = ROOT / "exercises" / "async-parameter-server"


def _start_daemon(folder: Path, *extra: str, env=None) -> tuple[subprocess.Popen, Path]:
    path = folder / "sandbox.sock"
    proc = subprocess.Popen(
        [sys.executable, "-m", "runner.sandbox.daemon", "--socket", str(path),
         "--group", str(os.getgid()), *extra],
        cwd=ROOT, env={**os.environ, "OVERLAP_SANDBOX_POOL_SIZE": "1", **(env or {})},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 30
    while not path.exists():
        assert proc.poll() is None, proc.stdout.read().decode()
        assert time.monotonic() < deadline, "the daemon never listened"
        time.sleep(0.05)
    return proc, path


def _stop(proc: subprocess.Popen) -> str:
    proc.terminate()
    try:
        out, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out.decode(errors="replace")


def _ours() -> set[str]:
    """Sandbox containers a daemon started from this test run left (the daemon runs on
    this host, in this pid namespace: the same owner)."""
    from runner.sandbox.backends.base import owner_id
    from tests.sandbox.helpers import sandbox_containers

    if get_backend("docker").problem():
        return set()
    return {c["Id"] for c in sandbox_containers()
            if (c.get("Labels") or {}).get("org.overlap.sandbox.owner") == owner_id()}


def _send_endless_job(path: Path, before: set[str]) -> socket.socket:
    """A worker's connection running a job that burns CPU until stopped, once its
    sandbox (a container of ours not in `before`) has started."""
    request = job_request(script_job("while True:\n    pass\n",
                                     Limits.from_mapping({**FAST, "wall_s": 60})), None)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(str(path))
    body = json.dumps(request).encode()
    conn.sendall(struct.pack(">I", len(body)) + body)
    deadline = time.monotonic() + 30
    while not _ours() - before:
        assert time.monotonic() < deadline, "the job's sandbox never started"
        time.sleep(0.1)
    return conn


@pytest.fixture
def daemon(tmp_path, monkeypatch):
    proc, path = _start_daemon(tmp_path)
    monkeypatch.setenv("OVERLAP_SANDBOX_SOCKET", str(path))
    # The worker's side has no engine at all: nothing here may fall back to it.
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    yield path
    monkeypatch.delenv("DOCKER_HOST")
    _stop(proc)
    # A daemon that stops (even a second after it started, its pool still starting)
    # leaves no sandbox behind.
    assert not _ours(), "the daemon left sandboxes behind"


def _ask(path: Path, message: dict | bytes) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(30)
        conn.connect(str(path))
        body = message if isinstance(message, bytes) else json.dumps(message).encode()
        conn.sendall(struct.pack(">I", len(body)) + body)
        head = conn.recv(4, socket.MSG_WAITALL)
        if len(head) < 4:
            return {}
        size = struct.unpack(">I", head)[0]
        data = b""
        while len(data) < size:
            data += conn.recv(size - len(data))
    return json.loads(data)


def _a_job(**job) -> dict:
    request = job_request(script_job("print(1)", Limits.from_mapping(FAST)), None)
    request["job"].update(job)
    return request


@pytest.mark.docker
def test_verdicts_through_the_daemon_are_the_sandboxes_verdicts(daemon):
    if get_backend("daemon").problem():
        pytest.skip(f"the daemon cannot run sandboxes here: {get_backend('daemon').problem()}")
    assert choose_backend("auto").name == "daemon"
    accepted = grade(EXERCISE, (EXERCISE / "solution.py").read_text(), backend="daemon")
    assert accepted["verdict"] == "accepted", accepted.get("message")
    assert accepted["sandbox"]["backend"] == "docker"
    assert accepted["sandbox"]["via"] == "daemon"
    slow = grade(EXERCISE, (EXERCISE / "starter.py").read_text(), backend="daemon")
    assert slow["verdict"] == "too_slow", slow.get("message")
    broken = grade(EXERCISE, "def train(:\n", backend="daemon")
    assert broken["verdict"] == "syntax_error"
    # The generic path, and what the run sees: none of the caller's environment.
    code = program("print(os.environ.get('DOCKER_HOST'), file=sys.stderr)\n"
                   + report("pass", pid=os.getpid()))
    result = run_script(code, backend="daemon", limits=FAST)
    assert result["status"] == "pass"
    assert "no-engine" not in result.get("stderr", "")


def test_the_socket_is_open_to_its_owner_and_the_workers_group_only(daemon):
    mode = os.stat(daemon).st_mode
    assert stat.S_ISSOCK(mode)
    assert stat.S_IMODE(mode) == 0o660
    assert os.stat(daemon).st_gid == os.getgid()


@pytest.mark.parametrize("request_fields, why", [
    ({"mounts": [{"source": "/", "target": "/host"}]}, "takes no 'mounts'"),
    ({"volumes": {"/": {"bind": "/host", "mode": "rw"}}}, "takes no 'volumes'"),
    ({"privileged": True}, "takes no 'privileged'"),
    ({"image": "debian:12"}, "takes no 'image'"),
    ({"network_mode": "host", "pid_mode": "host"}, "takes no 'network_mode', 'pid_mode'"),
    ({"env": {"LD_PRELOAD": "/tmp/x.so"}}, "takes no 'env'"),
    ({"rlimits": {"NPROC": 10**6}}, "takes no 'rlimits'"),
    ({"limits": {"memory_mib": 10**7}}, "above this daemon's ceiling"),
    ({"limits": {"cap_add": 1}}, "unknown limit"),
    ({"limits": {"wall_s": -1}}, "must be a positive number"),
    ({"files": {"../../etc/cron.d/x": "eA=="}}, "unsafe file name"),
    ({"files": {"/etc/passwd": "eA=="}}, "unsafe file name"),
    ({"files": {"a/./b": "eA=="}}, "unsafe file name"),
    ({"files": {"x.py": "not base64!"}}, "not base64"),
    ({"entry": {"module": "os", "argv": ["system"]}}, "runner's grade command"),
    ({"entry": {"script": "/bin/sh", "argv": []}}, "runs candidate.py"),
    ({"as_candidate": "yes"}, "true or false"),
])
def test_a_request_that_asks_for_anything_but_a_job_is_refused(request_fields, why):
    with pytest.raises(Refused, match=why):
        job_from_request(_a_job(**request_fields))


def test_a_run_request_with_extra_top_level_fields_or_a_gpu_it_does_not_serve_is_refused():
    with pytest.raises(Refused, match="takes no 'host_config'"):
        job_from_request({**_a_job(), "host_config": {"Binds": ["/:/host"]}})
    with pytest.raises(Refused, match="serves no GPU"):
        job_from_request({**_a_job(), "gpu": "all"})
    with pytest.raises(Refused, match="serves GPUs 0 only"):
        job_from_request({**_a_job(), "gpu": ["0", "1"]}, served_gpu=["0"])


def test_oversized_files_are_refused_before_anything_starts():
    big = base64.b64encode(b"x" * (10 * 1024 * 1024)).decode()
    with pytest.raises(Refused, match="larger than"):
        job_from_request(_a_job(files={"candidate.py": big}))


def test_a_job_survives_the_trip_through_a_request_unchanged():
    original = grade_job(EXERCISE, "print('hi')\n", 2, Limits.from_mapping(FAST))
    job, gpu = job_from_request(json.loads(json.dumps(job_request(original, None))))
    assert (job.entry, job.files, job.limits, job.as_candidate) == (
        original.entry, original.files, original.limits, original.as_candidate)
    assert gpu is None
    # Nothing interviewer-only travels: the job carries what grade_job put in it.
    assert not any(name.endswith(("solution.py", "guide.yaml")) for name in job.files)


def test_the_daemon_answers_refusals_and_garbage_with_reasons_and_keeps_serving(daemon):
    refused = _ask(daemon, _a_job(mounts=[{"source": "/", "target": "/host"}]))
    assert refused == {"ok": False, "refused": "a job takes no 'mounts'"}
    assert "unknown request" in _ask(daemon, {"op": "exec", "cmd": "sh"})["refused"]
    assert _ask(daemon, b"not json")["refused"] == "the message is not JSON"
    # The Docker API spoken to the daemon's socket: never understood as a request.
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(30)
        conn.connect(str(daemon))
        conn.sendall(b"POST /containers/create HTTP/1.1\r\nHost: docker\r\n\r\n"
                     b'{"Image": "debian", "HostConfig": {"Binds": ["/:/host"]}}')
        answer = conn.recv(65536)
    assert b"larger than" in answer and b"HTTP/1.1 2" not in answer
    # A 4 GiB announcement is refused from its header, without reading (or waiting).
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(10)
        conn.connect(str(daemon))
        conn.sendall(struct.pack(">I", 0xFFFFFFFF))
        assert b"larger than" in conn.recv(65536)
    # A client that stalls mid-request holds nobody up.
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as stalled:
        stalled.connect(str(daemon))
        stalled.sendall(struct.pack(">I", 100) + b"{")
        started = time.monotonic()
        status = _ask(daemon, {"op": "status"})
        assert time.monotonic() - started < 10
    assert status["ok"] is True and status["refused"] >= 4


def test_the_docker_client_pointed_at_the_daemon_cannot_start_a_container(daemon):
    docker = pytest.importorskip("docker")
    with pytest.raises(docker.errors.DockerException):
        client = docker.DockerClient(base_url=f"unix://{daemon}", timeout=10)
        client.containers.run("overlap-sandbox:latest", "true",
                              volumes={"/": {"bind": "/host", "mode": "rw"}})
    assert _ask(daemon, {"op": "status"})["ok"] is True  # and it still serves


def test_a_worker_whose_daemon_is_gone_gets_unavailable_not_a_verdict(tmp_path, monkeypatch):
    monkeypatch.setenv("OVERLAP_SANDBOX_SOCKET", str(tmp_path / "gone.sock"))
    backend = get_backend("daemon")
    assert "no sandbox daemon socket" in backend.problem()
    with pytest.raises(SandboxUnavailable, match="no sandbox daemon socket"):
        run_script("print(1)", backend="daemon", limits=FAST)


@pytest.mark.docker
def test_a_worker_that_hangs_up_has_its_sandbox_removed_at_once(tmp_path):
    """A worker process that dies mid-run closes its connection: the daemon stops the job
    then, instead of letting it run to its limits while holding one of its slots."""
    if get_backend("docker").problem():
        pytest.skip(f"docker sandbox unavailable: {get_backend('docker').problem()}")
    proc, path = _start_daemon(tmp_path, "--jobs-at-once", "1",
                               env={"OVERLAP_SANDBOX_POOL_SIZE": "0"})
    try:
        ours = _ours
        before = ours()
        conn = _send_endless_job(path, before)
        time.sleep(1.0)  # the job is burning CPU now
        conn.close()  # the worker's process dies
        hung_up = time.monotonic()
        while ours() - before:
            assert time.monotonic() - hung_up < 5, "the sandbox outlived its worker"
            time.sleep(0.1)
        # The slot is free again: the next job runs at once.
        started = time.monotonic()
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("OVERLAP_SANDBOX_SOCKET", str(path))
            result = run_script(program(report("pass")), backend="daemon", limits=FAST)
        assert result["status"] == "pass"
        assert time.monotonic() - started < 20
    finally:
        log = _stop(proc)
    assert "hung up: its job is stopped" in log


def test_a_flood_of_connections_is_answered_busy_and_the_daemon_keeps_serving(daemon):
    from runner.sandbox.daemon import MAX_CONNECTIONS

    held = []
    try:
        for _ in range(MAX_CONNECTIONS):
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.connect(str(daemon))
            conn.sendall(struct.pack(">I", 100))  # a request that never completes
            held.append(conn)
        deadline = time.monotonic() + 15  # every held connection has its thread
        while (busy := _ask(daemon, {"op": "status"})).get("ok") and \
                time.monotonic() < deadline:
            time.sleep(0.2)
        assert busy["ok"] is False and "busy" in busy["unavailable"], busy
    finally:
        for conn in held:
            conn.close()
    deadline = time.monotonic() + 10
    while True:  # the held connections' threads end as their sockets close
        status = _ask(daemon, {"op": "status"})
        if status.get("ok") or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert status["ok"] is True, status


@pytest.mark.docker
def test_a_daemon_stopped_mid_job_removes_the_jobs_sandbox(tmp_path):
    if get_backend("docker").problem():
        pytest.skip(f"docker sandbox unavailable: {get_backend('docker').problem()}")
    proc, path = _start_daemon(tmp_path, env={"OVERLAP_SANDBOX_POOL_SIZE": "0"})
    try:
        conn = _send_endless_job(path, set())
    finally:
        _stop(proc)  # SIGTERM, as compose stops it
    assert not _ours(), "the job's sandbox outlived its daemon"
    conn.settimeout(10)
    heard = conn.recv(65536)  # the worker hears that the daemon went away, never a verdict
    conn.close()
    assert heard == b"" or (b"stopped during the job" in heard and b'"result"' not in heard)
