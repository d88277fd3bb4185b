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


class Stack:
    def __init__(self, root: Path, var_dir: Path, web_port: int, redis_port: int, log):
        self.root, self.var_dir, self.log = root, var_dir, log
        self.web_port, self.redis_port = web_port, redis_port
        self.children: list[Child] = []
        self.env = {**os.environ, "PYTHONPATH": f"{root / 'platform'}{os.pathsep}{root}"}

    def _start(self, name: str, argv: list[str], env: dict | None = None) -> Child:
        self.log(f"starting {name}: {' '.join(argv)}")
        child = Child(name, subprocess.Popen(argv, cwd=self.root, env={**self.env, **(env or {})}))
        self.children.append(child)
        return child

    def start(self) -> None:
        self.start_redis()
        self._choose_sandbox()
        self.start_worker()
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

    def start_worker(self) -> None:
        self._start("worker", [
            sys.executable, "-m", "celery", "-A", "overlap", "worker", "--loglevel", "INFO",
            # A GPU host also takes the `gpu` queue (OVERLAP_GPU=all or device ids).
            "--queues", "default,gpu" if os.environ.get("OVERLAP_GPU") else "default",
            "--concurrency", "2", "--hostname", "overlap-local@%h",
        ])

    def start_web(self) -> None:
        # An ASGI server: pages over HTTP and the live pad over WebSocket (Channels).
        self._start("web", [
            sys.executable, "-m", "uvicorn", "overlap.asgi:application",
            "--host", "127.0.0.1", "--port", str(self.web_port),
            "--ws", "websockets", "--ws-max-size", str(512 * 1024),
            # Keystroke-sized messages: compressing each costs more CPU than it saves.
            "--ws-per-message-deflate", "false",
            "--log-level", "info", "--no-access-log",
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
        for child in reversed(self.children):
            if child.process.poll() is None:
                child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        for child in reversed(self.children):
            try:
                child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.log(f"{child.name} did not stop in time; killing it")
                child.process.kill()
                child.process.wait()
        self.log("stopped: " + ", ".join(child.name for child in self.children))
