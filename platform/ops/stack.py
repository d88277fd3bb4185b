"""The local stack behind `make run`: Redis (owned), a Celery worker and the web server.

Each runs as a child process; when one dies or Ctrl-C arrives, all of them are stopped.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Child:
    name: str
    process: subprocess.Popen


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


def worker_queues() -> str:
    """make run's worker takes every CPU queue; a GPU host also takes `gpu`."""
    queues = ["default", "authoring", "recovery"]
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
        child = Child(name, subprocess.Popen(argv, cwd=self.root, env={**self.env, **(env or {})}))
        self.children.append(child)
        return child

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

    def wait(self) -> int:
        """Block until a child exits; returns its exit status."""
        while True:
            for child in self.children:
                code = child.process.poll()
                if code is not None:
                    self.log(f"{child.name} exited with status {code}")
                    return code
            time.sleep(0.3)

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
