"""`make run`'s stack: Redis it owns, a Celery worker and the web server, stopped on Ctrl-C."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _get(url: str, timeout: float = 30.0) -> bytes:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return response.read()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_stack_serves_the_site_runs_tasks_and_stops_everything_on_ctrl_c(tmp_path):
    web_port, redis_port = _free_port(), _free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "REDIS_URL", "SECRET_KEY"}}
    env.update(DEBUG="1", OVERLAP_VAR_DIR=str(tmp_path))
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "--noinput"], cwd=ROOT, env=env, check=True,
                   capture_output=True)
    stack = subprocess.Popen(
        [*manage, "runstack", "--port", str(web_port), "--redis-port", str(redis_port)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        # 200 only once the database, the stack's Redis and the worker's heartbeat are up.
        health = json.loads(_get(f"http://127.0.0.1:{web_port}/healthz", timeout=60))
        assert health["status"] == "ok", health
        login = _get(f"http://127.0.0.1:{web_port}/accounts/login/").decode()
        assert "Log in" in login
        assert _port_open(redis_port), "the stack's own Redis is not listening"
        # The worker answers through the stack's Redis.
        check = subprocess.run(
            [sys.executable, "-c",
             "import django; django.setup(); from overlap.celery import health; "
             "print(health.delay('stack').get(timeout=30)['token'])"],
            cwd=ROOT, capture_output=True, text=True, timeout=60,
            env={**env, "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
                 "PYTHONPATH": f"{ROOT / 'platform'}:{ROOT}",
                 "DJANGO_SETTINGS_MODULE": "overlap.settings"},
        )
        assert check.stdout.strip() == "stack", check.stderr
    finally:
        stack.send_signal(signal.SIGINT)
        output, _ = stack.communicate(timeout=30)
    assert "stopped: redis, worker, web" in output
    assert not _port_open(web_port)
    assert not _port_open(redis_port)
