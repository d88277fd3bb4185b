"""The `daemon` backend: jobs go to the sandbox daemon (runner.sandbox.daemon) over its
Unix socket, and the daemon runs them in its docker sandboxes. The worker holds no Docker
socket and needs no root; the daemon alone decides what a container may be.

    OVERLAP_SANDBOX=daemon  OVERLAP_SANDBOX_SOCKET=/run/overlap-sandbox/sandbox.sock
"""

import os
import socket
import threading
import time

from runner.sandbox.backends.base import Backend, Sandbox, SandboxUnavailable
from runner.sandbox.daemon import (
    DEFAULT_SOCKET,
    Refused,
    job_request,
    recv_frame,
    send_frame,
)
from runner.sandbox.job import Job
from runner.sandbox.limits import Limits

STATUS_TIMEOUT_S = 5.0
REPLY_SLACK_S = 90.0  # a cold sandbox's start on the daemon's side, on top of the job's backstop
MAX_REPLY_BYTES = 64 * 1024 * 1024


def socket_path() -> str:
    return os.environ.get("OVERLAP_SANDBOX_SOCKET") or DEFAULT_SOCKET


class DaemonBackend(Backend):
    name = "daemon"
    isolated = True
    runs_whole_jobs = True  # run.execute hands it the job, not a sandbox to drive

    def __init__(self):
        self._checked_at = 0.0
        self._checked_path = ""
        self._problem: str | None = "not checked"
        self._lock = threading.Lock()

    def problem(self) -> str | None:
        path = socket_path()
        with self._lock:
            # An answer holds 10 s; a daemon that did not answer (restarting) is asked
            # again after 1 s, so a worker takes work again as soon as it is back.
            keep = 10.0 if self._problem is None else 1.0
            if time.monotonic() - self._checked_at >= keep or path != self._checked_path:
                self._problem = self._check(path)
                self._checked_at, self._checked_path = time.monotonic(), path
            return self._problem

    def _check(self, path: str) -> str | None:
        if not os.path.exists(path):
            return f"no sandbox daemon socket at {path}"
        try:
            reply = self._ask({"op": "status"}, STATUS_TIMEOUT_S)
        except SandboxUnavailable as exc:
            return str(exc)
        if reply.get("problem"):
            return f"the sandbox daemon cannot run sandboxes: {reply['problem']}"
        return None

    def execute(self, job: Job, gpu) -> dict:
        """The job's result, as the daemon's sandbox produced it."""
        reply = self._ask(job_request(job, gpu), job.limits.backstop_s + REPLY_SLACK_S)
        result = reply.get("result")
        if not isinstance(result, dict):
            raise SandboxUnavailable("the sandbox daemon's answer holds no result")
        sandbox = result.get("sandbox")
        if isinstance(sandbox, dict):
            sandbox["via"] = "daemon"
        return result

    def _ask(self, message: dict, timeout_s: float) -> dict:
        path = socket_path()
        deadline = time.monotonic() + timeout_s
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.settimeout(STATUS_TIMEOUT_S)
                conn.connect(path)
                conn.settimeout(timeout_s)
                send_frame(conn, message)
                reply = recv_frame(conn, MAX_REPLY_BYTES, deadline)
        except (OSError, ConnectionError, TimeoutError, Refused) as exc:
            raise SandboxUnavailable(
                f"the sandbox daemon at {path} did not answer ({type(exc).__name__}: {exc})"
            ) from exc
        if reply.get("ok"):
            return reply
        if reply.get("refused"):
            raise SandboxUnavailable(f"the sandbox daemon refused the job: {reply['refused']}")
        raise SandboxUnavailable(
            f"the sandbox daemon cannot run it: {reply.get('unavailable') or 'no reason given'}"
        )

    def start(self, limits: Limits, gpu=None, *, preload: bool = False) -> Sandbox:
        raise SandboxUnavailable("the daemon backend runs whole jobs: its daemon keeps the pool")

    def reap(self) -> int:
        return 0  # the daemon removes its own leftovers when it starts
