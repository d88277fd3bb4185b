"""The `docker` backend: a fresh, hardened container per run. The production backend.

Each container: no network, read-only root, a size-capped tmpfs /tmp, a trusted side (the
first process and the grader) holding only CAP_SETUID, CAP_SETGID and CAP_KILL, the
candidate's processes under a uid of their own with no capability, no-new-privileges,
the default seccomp profile, memory = memory+swap limit, a CPU quota, a pids limit,
nofile/fsize ulimits and an environment of our own. The job goes in on stdin and the
report comes out on stdout (attach), so no host path is ever mounted or read back, and a
worker that itself runs in a container needs only the engine's socket.
Containers carry labels; the reaper removes what a killed worker left behind.
"""

import contextlib
import json
import os
import select
import socket
import struct
import threading
import time

from runner.sandbox.backends.base import (
    BOOT,
    DIAG_BYTES,
    PYTHON_FLAGS,
    READY_LINE,
    Backend,
    Sandbox,
    SandboxUnavailable,
    child_env,
    owner_id,
    preload_modules,
    process_token,
    token_alive,
)
from runner.sandbox.image import DEFAULT_IMAGE, runner_hash
from runner.sandbox.job import Job
from runner.sandbox.limits import Limits
from runner.sandbox.result import RawRun

LABEL = "org.overlap.sandbox"
INSIDE_PYTHON = "/opt/venv/bin/python"
INSIDE_RUNNER_PARENT = "/opt/overlap"
IDLE_TIMEOUT_S = 3600
# Jobs one pooled sandbox serves, one after the other, each after a complete reset (see
# runner.sandbox.inside, reset_between_jobs): no container start and no torch import per
# run. OVERLAP_SANDBOX_JOBS=1 gives every run a fresh container.
DEFAULT_JOBS = 50


def jobs_per_sandbox() -> int:
    return max(1, int(os.environ.get("OVERLAP_SANDBOX_JOBS", DEFAULT_JOBS)))
STDOUT, STDERR = 1, 2


def image_name() -> str:
    return os.environ.get("OVERLAP_SANDBOX_IMAGE", DEFAULT_IMAGE)


class DockerSandbox(Sandbox):
    backend = "docker"

    def __init__(self, client, container, sock, expires: float):
        self.client = client
        self.container = container
        self.sock = sock
        self.expires = expires
        self._buffer = b""
        self._stderr = b""
        self._destroyed = False
        self.served = 0  # jobs this sandbox has run
        self.serving = False  # whether its last report said it takes another job

    def prepare(self, job: Job) -> None:
        job.as_candidate = "script" in job.entry
        job.env = child_env(job.limits, "/tmp", INSIDE_RUNNER_PARENT)
        # nofile and fsize are the container's ulimits; pids and memory its cgroup.
        job.rlimits = {"CORE": 0}

    def _frames(self, deadline: float):
        """Yield (stream, bytes) frames of the attach stream until it closes."""
        while True:
            while len(self._buffer) < 8 or len(self._buffer) < 8 + _frame_size(self._buffer):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError
                self.sock.settimeout(min(remaining, 1.0))
                try:
                    chunk = self.sock.recv(65536)
                except TimeoutError:
                    continue
                if not chunk:
                    return
                self._buffer += chunk
            size = _frame_size(self._buffer)
            stream, payload = self._buffer[0], self._buffer[8 : 8 + size]
            self._buffer = self._buffer[8 + size :]
            yield stream, payload

    def wait_ready(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        try:
            for stream, payload in self._frames(deadline):
                if stream == STDERR:
                    self._stderr += payload
                    if READY_LINE in self._stderr:
                        self._stderr = self._stderr.replace(READY_LINE, b"", 1)
                        return True
        except TimeoutError:
            return False
        return False

    def alive(self) -> bool:
        """An ended container closes its attach stream: readable, and nothing to read."""
        if self._destroyed:
            return False
        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
            return not readable or self.sock.recv(1, socket.MSG_PEEK) != b""
        except OSError:
            return False

    def run(self, job: Job, deadline: float) -> RawRun:
        cap = job.envelope_cap()
        out = bytearray()
        raw = RawRun()
        self.sock.sendall(job.payload())
        try:
            for stream, payload in self._frames(deadline):
                if stream == STDOUT:
                    out += payload
                    if len(out) > cap:
                        raw.truncated = True
                        break
                    if out.endswith(b"\n"):
                        break  # the report is one line: complete, the container is ending
                else:
                    self._stderr = (self._stderr + payload)[-DIAG_BYTES:]
        except TimeoutError:
            raw.host_timeout = True
        if raw.host_timeout or raw.truncated:
            with contextlib.suppress(Exception):
                self.container.kill()
        if not out.endswith(b"\n"):
            # No complete report: how the container ended is all there is to go on.
            try:
                status = self.container.wait(timeout=10)
                raw.exit_status = status.get("StatusCode")
            except Exception as exc:  # the engine did not answer in time
                raw.error = f"waiting for the container failed: {exc}"
            with contextlib.suppress(Exception):
                self.container.reload()
                raw.oom_killed = bool(self.container.attrs["State"].get("OOMKilled"))
        raw.stdout = bytes(out[:cap])
        raw.stderr = self._stderr[-DIAG_BYTES:]
        self.served += 1
        self.serving = _serving(raw.stdout, job.nonce) and not (
            raw.host_timeout or raw.truncated or raw.error
        )
        return raw

    def destroy(self, *, wait: bool = False) -> None:
        if self._destroyed:
            return
        self._destroyed = True
        with contextlib.suppress(Exception):
            self.sock.close()
        if wait:
            _remove(self.container)
            return
        # The run is over (its first process exited or was killed): removing the container
        # can happen after the result is returned. The reaper catches what this misses.
        threading.Thread(target=_remove, args=(self.container,), daemon=True).start()


def _serving(report: bytes, nonce: str) -> bool:
    """Whether the sandbox's report (its job's, by the nonce) says it takes another job."""
    try:
        envelope = json.loads(report)
    except ValueError:
        return False
    return (
        isinstance(envelope, dict)
        and envelope.get("nonce") == nonce
        and envelope.get("serving") is True
    )


def _frame_size(buffer: bytes) -> int:
    return struct.unpack(">I", buffer[4:8])[0]


def _remove(container) -> None:
    with contextlib.suppress(Exception):
        container.remove(force=True)


class DockerBackend(Backend):
    name = "docker"
    isolated = True

    def __init__(self):
        self._client = None
        self._checked_at = 0.0
        self._checked_key: tuple | None = None
        self._problem: str | None = "not checked"
        # Threads of one process ask at once (a pool starting, the heartbeat): one checks,
        # the others wait for its answer instead of reading "not checked" meanwhile.
        self._check_lock = threading.Lock()

    def client(self):
        if self._client is None:
            import docker

            self._client = docker.from_env(timeout=30)
        return self._client

    def problem(self) -> str | None:
        # Checked at most every 10 s: the engine can come and go. Another image (or the
        # stale-image setting) is another question: asked at once.
        key = (image_name(), os.environ.get("OVERLAP_SANDBOX_ALLOW_STALE_IMAGE"))
        with self._check_lock:
            if time.monotonic() - self._checked_at >= 10 or key != self._checked_key:
                self._problem = self._check()
                self._checked_at, self._checked_key = time.monotonic(), key
            return self._problem

    def _check(self) -> str | None:
        try:
            client = self.client()
            client.ping()
        except Exception as exc:
            self._client = None
            return f"no Docker engine answers ({type(exc).__name__})"
        try:
            image = client.images.get(image_name())
        except Exception:
            return f"the sandbox image {image_name()} is missing (docker/sandbox/build.sh)"
        stale_ok = os.environ.get("OVERLAP_SANDBOX_ALLOW_STALE_IMAGE") == "1"
        if not stale_ok and image.labels.get("org.overlap.runner-hash") != runner_hash():
            return (
                f"the sandbox image {image_name()} was built from other runner sources "
                "than this checkout's (rebuild it: docker/sandbox/build.sh)"
            )
        return None

    def start(self, limits: Limits, gpu=None, *, preload: bool = False) -> DockerSandbox:
        client = self.client()
        command = [INSIDE_PYTHON, *PYTHON_FLAGS, "-c", BOOT.format(parent=INSIDE_RUNNER_PARENT)]
        command += ["--idle-timeout", str(IDLE_TIMEOUT_S)]
        if preload:
            command += ["--preload", preload_modules(), "--announce"]
            command += ["--serve", str(jobs_per_sandbox())]
        expires = time.time() + IDLE_TIMEOUT_S + limits.wall_s + 120
        try:
            container = client.containers.create(
                image_name(),
                command=command,
                **container_options(limits, gpu, expires),
            )
        except Exception as exc:
            raise SandboxUnavailable(f"creating a sandbox container failed: {exc}") from exc
        try:
            sock = client.api.attach_socket(
                container.id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
            raw_sock = getattr(sock, "_sock", sock)
            if not isinstance(raw_sock, socket.socket):
                raise SandboxUnavailable("the Docker attach stream is not a socket")
            container.start()
        except BaseException:
            _remove(container)
            raise
        return DockerSandbox(client, container, raw_sock, expires)

    def remove_own(self) -> int:
        """Remove every sandbox container this process started (at its shutdown: the
        removals it left to background threads would die with it). Returns how many."""
        try:
            api = self.client().api
            containers = api.containers(
                all=True, filters={"label": f"{LABEL}.process={process_token()}"})
        except Exception:
            return 0
        for container in containers:
            with contextlib.suppress(Exception):
                api.remove_container(container["Id"], force=True)
        return len(containers)

    def reap(self) -> int:
        """Remove sandbox containers that have stopped or expired, and those of this owner
        (host) whose starting process is gone (a killed worker's). A live process's
        sandboxes — another worker's runs and warm pool, or this worker's own children's —
        are never touched. Returns how many were removed."""
        try:
            api = self.client().api
            containers = api.containers(all=True, filters={"label": LABEL})
        except Exception:
            return 0
        removed = 0
        now = time.time()
        for container in containers:
            labels = container.get("Labels") or {}
            expired = float(labels.get(f"{LABEL}.expires", "0") or 0) < now
            orphan = labels.get(f"{LABEL}.owner") == owner_id() and not token_alive(
                labels.get(f"{LABEL}.process", ""))
            # "created" is a live worker's sandbox between create and start: not ended.
            ended = container.get("State") in ("exited", "dead")
            if ended or expired or orphan:
                with contextlib.suppress(Exception):
                    api.remove_container(container["Id"], force=True)
                removed += 1
        return removed


def container_options(limits: Limits, gpu, expires: float) -> dict:
    """The hardened configuration of every sandbox container."""
    from docker.types import DeviceRequest, LogConfig, Ulimit

    options = {
        "stdin_open": True,
        # The trusted side (the first process, the grader) is uid 0 with three capabilities
        # and nothing else: to start the candidate's processes under their own uid and to
        # kill them (runner.privileges). The candidate's processes have no capability.
        "user": "0:0",
        "environment": child_env(limits, "/tmp", INSIDE_RUNNER_PARENT),
        "working_dir": "/tmp",
        "hostname": "sandbox",
        "network_mode": "none",
        "ipc_mode": "private",
        "privileged": False,
        "read_only": True,
        "tmpfs": {"/tmp": f"rw,nosuid,nodev,size={limits.disk_bytes + 1024 * 1024},mode=1777"},
        "cap_drop": ["ALL"],
        "cap_add": ["SETUID", "SETGID", "KILL"],
        "security_opt": ["no-new-privileges"],
        "mem_limit": limits.memory_bytes,
        "memswap_limit": limits.memory_bytes,
        "nano_cpus": int(limits.cpus * 1e9),
        "pids_limit": limits.processes,
        "shm_size": 64 * 1024 * 1024,
        "ulimits": [
            Ulimit(name="nofile", soft=limits.open_files, hard=limits.open_files),
            Ulimit(name="fsize", soft=limits.disk_bytes, hard=limits.disk_bytes),
            Ulimit(name="core", soft=0, hard=0),
        ],
        "log_config": LogConfig(type="none"),
        "labels": {
            LABEL: "1",
            f"{LABEL}.owner": owner_id(),
            # The process that started it ("<pid>:<start ticks>"): alive, it is left alone.
            f"{LABEL}.process": process_token(),
            f"{LABEL}.expires": str(int(expires)),
        },
    }
    shares = os.environ.get("OVERLAP_SANDBOX_CPU_SHARES", "")
    if shares.isdigit() and int(shares) >= 2:
        # Relative CPU weight when sandboxes compete (default 1024): an authors' worker
        # gives its validations less, so they never slow a candidate's grading much.
        options["cpu_shares"] = int(shares)
    if gpu:
        if gpu == "all":
            request = DeviceRequest(count=-1, capabilities=[["gpu"]])
        else:
            request = DeviceRequest(device_ids=list(gpu), capabilities=[["gpu"]])
        options["device_requests"] = [request]
    return options
