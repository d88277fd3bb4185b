"""The local stack behind `make run`: Redis (owned), a Celery worker and the web server.

Each runs as a child process under supervision: one that dies is started again, after a
back-off that doubles while it keeps dying soon after a start (1 s up to 30 s) and is
reset once it has stayed up for a minute; the log says what died and when it comes back.
Only Ctrl-C or SIGTERM stops the stack, every child with it.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 30.0
STABLE_AFTER_S = 60.0  # up this long: its next crash restarts it after the first back-off


@dataclass
class Child:
    name: str
    process: subprocess.Popen
    argv: list[str] = field(default_factory=list)
    env: dict = field(default_factory=dict)
    started: float = 0.0
    backoff: float = FIRST_BACKOFF_S
    restart_at: float | None = None  # when a dead child is due to start again
    restarts: int = 0


def find_redis_server() -> str | None:
    """redis-server on PATH, else the binary shipped by the `redis-server` PyPI package."""
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redis_server  # optional: pip install redis-server
    except ImportError:
        return None
    return str(redis_server.REDIS_SERVER_PATH)


def wait_for_port(port: int, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            sock.settimeout(0.2)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.1)
    return False


def parse_bind(value: str, default_port: int = 8000) -> tuple[str, int]:
    """OVERLAP_BIND: "host:port", "host", ":port" or "[v6]:port" -> (host, port)."""
    value = value.strip()
    if value.startswith("["):
        host, _, rest = value[1:].partition("]")
        port = rest.lstrip(":")
    elif value.count(":") == 1:
        host, port = value.split(":")
    else:
        host, port = value, ""
    return host or "127.0.0.1", int(port) if port else default_port


WILDCARDS = {"0.0.0.0", "::", ""}

UVICORN_OPTIONS = (
    "--ws", "websockets", "--ws-max-size", str(512 * 1024),
    # Keystroke-sized messages: compressing each costs more CPU than it saves.
    "--ws-per-message-deflate", "false",
    "--log-level", "info", "--no-access-log",
    # The client's address is the socket's peer: uvicorn would otherwise take it from
    # X-Forwarded-For, which any local client can write. Behind a proxy the application
    # reads that header itself (OVERLAP_TRUSTED_PROXIES).
    "--no-proxy-headers",
)


def allowed_hosts_for(host: str) -> str:
    """ALLOWED_HOSTS when the operator set none: loopback names, the bound address, and
    this machine's names when bound to every interface."""
    names = ["127.0.0.1", "localhost", "[::1]"]
    if host in WILDCARDS:
        names += [socket.gethostname(), socket.getfqdn()]
    elif host not in names:
        names.append(host)
    return ",".join(dict.fromkeys(name for name in names if name))


# Authors' validations have a worker of their own, one grading at a time, whose sandboxes
# get a quarter of a candidate's CPU weight when both want the CPU: a validation never
# takes a candidate's slot, and slows a candidate's grading only by sharing idle CPU.
AUTHORING_CPU_SHARES = "256"


def worker_queues() -> str:
    """make run's candidate worker takes the runs and recovery; a GPU host also `gpu`."""
    queues = ["default", "recovery"]
    if os.environ.get("OVERLAP_GPU"):
        queues.append("gpu")
    return ",".join(queues)


class Stack:
    def __init__(self, root: Path, var_dir: Path, web_port: int, redis_port: int, log,
                 host: str = "127.0.0.1", workers: int = 1, concurrency: int = 2):
        self.root, self.var_dir, self.log = root, var_dir, log
        self.host, self.web_port, self.redis_port = host, web_port, redis_port
        self.workers, self.concurrency = workers, concurrency
        self.children: list[Child] = []
        self.env = {**os.environ, "PYTHONPATH": f"{root / 'platform'}{os.pathsep}{root}"}
        self.env.setdefault("ALLOWED_HOSTS", allowed_hosts_for(host))

    @property
    def url(self) -> str:
        shown = "127.0.0.1" if self.host in WILDCARDS else self.host
        shown = f"[{shown}]" if ":" in shown else shown
        return f"http://{shown}:{self.web_port}/"

    def _start(self, name: str, argv: list[str], env: dict | None = None) -> Child:
        self.log(f"starting {name}: {' '.join(argv)}")
        full_env = {**self.env, **(env or {})}
        child = Child(name, self._spawn(argv, full_env), argv, full_env, time.monotonic())
        self.children.append(child)
        return child

    def _spawn(self, argv: list[str], env: dict) -> subprocess.Popen:
        return subprocess.Popen(argv, cwd=self.root, env=env)

    def start(self) -> None:
        self.start_redis()
        self._choose_sandbox()
        self.start_workers()
        self.start_beat()
        self.start_web()

    def start_redis(self) -> None:
        if "REDIS_URL" in os.environ:
            self.log(f"using Redis at {os.environ['REDIS_URL']}")
        else:
            redis = find_redis_server()
            if redis is None:
                raise RuntimeError(
                    "No Redis: install redis-server (apt) or `pip install redis-server`, "
                    "or set REDIS_URL."
                )
            self.var_dir.mkdir(parents=True, exist_ok=True)
            self._start("redis", [
                redis, "--bind", "127.0.0.1", "--port", str(self.redis_port), "--save", "",
                "--appendonly", "no", "--dir", str(self.var_dir), "--loglevel", "warning",
            ])
            if not wait_for_port(self.redis_port):
                raise RuntimeError(f"Redis did not start on port {self.redis_port}")
            self.env["REDIS_URL"] = f"redis://127.0.0.1:{self.redis_port}/0"
            self.env["CHANNELS_REDIS_URL"] = f"redis://127.0.0.1:{self.redis_port}/1"

    def start_workers(self) -> None:
        for index in range(self.workers):
            name = "worker" if self.workers == 1 else f"worker{index + 1}"
            self._start(name, [
                sys.executable, "-m", "celery", "-A", "overlap", "worker", "--loglevel", "INFO",
                "--queues", worker_queues(), "--concurrency", str(self.concurrency),
                "--hostname", f"overlap-local-{index + 1}@%h",
            ])
        self._start("authoring-worker", [
            sys.executable, "-m", "celery", "-A", "overlap", "worker", "--loglevel", "INFO",
            "--queues", "authoring", "--concurrency", "1",
            "--hostname", "overlap-local-authoring@%h",
        ], env={"OVERLAP_SANDBOX_CPU_SHARES": AUTHORING_CPU_SHARES,
                "OVERLAP_SANDBOX_POOL_SIZE": "1"})
    def start_beat(self) -> None:
        # Celery beat: sends `overlap.recover` every few seconds (nothing stays stuck).
        self.var_dir.mkdir(parents=True, exist_ok=True)
        self._start("beat", [
            sys.executable, "-m", "celery", "-A", "overlap", "beat", "--loglevel", "WARNING",
            "--schedule", str(self.var_dir / f"celerybeat-schedule-{self.web_port}"),
        ])

    def start_web(self) -> None:
        # An ASGI server: pages over HTTP and the live pad over WebSocket (Channels).
        self._start("web", [
            sys.executable, "-m", "uvicorn", "overlap.asgi:application",
            "--host", self.host or "127.0.0.1", "--port", str(self.web_port),
            *UVICORN_OPTIONS,
        ], env={
            # The ASGI server runs the ORM in one thread per process (Channels' and
            # Django's thread-sensitive mode), so it keeps its connection between requests
            # instead of opening one per keystroke.
            "DB_CONN_MAX_AGE": os.environ.get("DB_CONN_MAX_AGE", "60"),
        })

    def _choose_sandbox(self) -> None:
        """Docker when an engine answers and the image exists, else bwrap, else (local
        trial only) the process backend, with a loud warning."""
        from runner import sandbox

        problems = sandbox.backend_problems()
        for name in ("docker", "bwrap"):
            if problems.get(name) is None:
                self.log(f"sandbox: {name}")
                return
            self.log(f"sandbox: {name} unavailable: {problems[name]}")
        self.env["OVERLAP_SANDBOX_ALLOW_PROCESS"] = "1"
        self.log("WARNING: no isolating sandbox here; candidate code runs as a plain "
                 "process (NOT isolated). Fine for a local trial, never for real interviews: "
                 "install bubblewrap or Docker (`make sandbox-image`).")

    def wait(self, until: float | None = None) -> None:
        """Supervise the children until Ctrl-C/SIGTERM (or the monotonic time ``until``,
        for tests): restart each one that dies (see the module docstring)."""
        while until is None or time.monotonic() < until:
            self.supervise_once()
            time.sleep(0.2)

    def supervise_once(self) -> None:
        now = time.monotonic()
        for child in self.children:
            if child.restart_at is None:
                code = child.process.poll()
                if code is None:
                    if now - child.started >= STABLE_AFTER_S:
                        child.backoff = FIRST_BACKOFF_S
                    continue
                if now - child.started >= STABLE_AFTER_S:
                    child.backoff = FIRST_BACKOFF_S
                child.restart_at = now + child.backoff
                self.log(f"{child.name} exited with status {code}; restarting it in "
                         f"{child.backoff:g} s")
                child.backoff = min(MAX_BACKOFF_S, child.backoff * 2)
            elif now >= child.restart_at:
                child.process = self._spawn(child.argv, child.env)
                child.started, child.restart_at = now, None
                child.restarts += 1
                self.log(f"{child.name} restarted (pid {child.process.pid}, restart "
                         f"{child.restarts})")

    def stop(self) -> None:
        """Stop the children one by one, last started first: the web server and the
        workers have ended before Redis, which they talk to while they shut down."""
        deadline = time.monotonic() + 10
        for child in reversed(self.children):
            if child.process.poll() is None:
                child.process.send_signal(signal.SIGTERM)
            try:
                child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.log(f"{child.name} did not stop in time; killing it")
                child.process.kill()
                child.process.wait()
        self.log("stopped: " + ", ".join(child.name for child in self.children))
