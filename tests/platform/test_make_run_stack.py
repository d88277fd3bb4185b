"""`make run`'s stack: Redis it owns, a Celery worker and the web server, stopped on Ctrl-C."""

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
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
    """As `make run` starts it: DEBUG off, a SECRET_KEY generated once into var/ (0600),
    SQLite in WAL mode, the address from OVERLAP_BIND, Celery beat next to the worker."""
    web_port, redis_port = _free_port(), _free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DEBUG", "ALLOWED_HOSTS"}}
    key_file = tmp_path / "secret_key"
    env.update(OVERLAP_VAR_DIR=str(tmp_path), OVERLAP_SECRET_KEY_FILE=str(key_file),
               OVERLAP_BIND=f"127.0.0.1:{web_port}")
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "--noinput"], cwd=ROOT, env=env, check=True,
                   capture_output=True)
    assert key_file.stat().st_mode & 0o777 == 0o600
    key = key_file.read_text().strip()
    assert len(key) >= 50
    with sqlite3.connect(tmp_path / "overlap.sqlite3") as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    stack = subprocess.Popen(
        [*manage, "runstack", "--redis-port", str(redis_port)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        # 200 only once the database, the stack's Redis and the worker's heartbeat are up.
        health = json.loads(_get(f"http://127.0.0.1:{web_port}/healthz", timeout=60))
        assert health["status"] == "ok", health
        login = _get(f"http://127.0.0.1:{web_port}/accounts/login/").decode()
        assert "Log in" in login
        # DEBUG is off: no debug page, even for a page that does not exist.
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"http://127.0.0.1:{web_port}/no-such-page/", timeout=5)
        body = missing.value.read().decode()
        assert missing.value.code == 404 and "Traceback" not in body and "DEBUG" not in body
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
        # A crashed web server is restarted: SIGKILL it (a child of this test's stack),
        # and the site answers again within seconds.
        web = _child_running(stack.pid, "uvicorn")
        os.kill(web, signal.SIGKILL)
        killed = time.monotonic()
        while _port_open(web_port) and time.monotonic() - killed < 5:
            time.sleep(0.05)
        assert "Log in" in _get(f"http://127.0.0.1:{web_port}/accounts/login/").decode()
        print(f"web server restarted and answering {time.monotonic() - killed:.2f} s "
              "after SIGKILL")
    finally:
        stack.send_signal(signal.SIGINT)
        output, _ = stack.communicate(timeout=30)
    assert f"running at http://127.0.0.1:{web_port}/ (DEBUG off" in output
    assert "web exited with status -9; restarting it in 1 s" in output
    assert "web restarted (pid" in output
    assert "stopped: redis, worker, authoring-worker, beat, web" in output
    assert not _port_open(web_port)
    assert not _port_open(redis_port)
    assert key_file.read_text().strip() == key  # generated once, kept


def _child_running(parent: int, word: str) -> int:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent and word in cmdline:
            return int(entry.name)
    raise AssertionError(f"no child of {parent} runs {word}")


def test_a_child_that_keeps_dying_is_restarted_with_a_growing_back_off(tmp_path):
    from ops import stack as stack_module
    from ops.stack import Stack

    lines: list[str] = []
    stack = Stack(ROOT, tmp_path, 0, 0, log=lines.append)
    crasher = stack._start("worker", [sys.executable, "-c", "raise SystemExit(3)"])
    steady = stack._start("web", [sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        stack.wait(until=time.monotonic() + 4.5)
        exits = [line for line in lines if line.startswith("worker exited")]
        # 1 s, then 2 s: at most three starts in 4.5 s, each announced
        assert exits[:2] == ["worker exited with status 3; restarting it in 1 s",
                             "worker exited with status 3; restarting it in 2 s"]
        assert 1 <= crasher.restarts <= 2 and steady.restarts == 0
        assert stack_module.MAX_BACKOFF_S == 30.0
    finally:
        stack.stop()


def test_bind_addresses_are_parsed():
    from ops.stack import allowed_hosts_for, parse_bind

    assert parse_bind("0.0.0.0:8080") == ("0.0.0.0", 8080)
    assert parse_bind(":9000") == ("127.0.0.1", 9000)
    assert parse_bind("[::1]:8001") == ("::1", 8001)
    assert parse_bind("example.org") == ("example.org", 8000)
    assert "interviews.local" in allowed_hosts_for("interviews.local").split(",")


TRAPS_SIGTERM = """
import signal, sys, time

name, delay, log = sys.argv[1], float(sys.argv[2]), sys.argv[3]


def bye(*_):
    with open(log, "a") as f:
        f.write(f"{name} term\\n")
    time.sleep(delay)  # a shutdown that still talks to what it depends on
    with open(log, "a") as f:
        f.write(f"{name} exit\\n")
    sys.exit(0)


signal.signal(signal.SIGTERM, bye)
with open(log, "a") as f:
    f.write(f"{name} up\\n")
while True:
    time.sleep(0.05)
"""


def test_stop_ends_the_children_last_started_first_each_before_the_next(tmp_path):
    """The web server and the worker talk to Redis while they shut down (Channels'
    pub/sub, Celery's heartbeat): Redis, started first, gets its SIGTERM only once they
    have exited, so their shutdown logs no connection errors."""
    from ops.stack import Stack

    log = tmp_path / "log"
    stack = Stack(ROOT, tmp_path, 0, 0, log=lambda line: None)
    for name, delay in (("redis", 0), ("worker", 0.3), ("web", 0.3)):
        stack._start(name, [sys.executable, "-c", TRAPS_SIGTERM, name, str(delay), str(log)])
    deadline = time.monotonic() + 10
    while (not log.exists() or log.read_text().count(" up") < 3) and time.monotonic() < deadline:
        time.sleep(0.05)
    stack.stop()
    events = [line for line in log.read_text().splitlines() if not line.endswith(" up")]
    assert events == ["web term", "web exit", "worker term", "worker exit",
                      "redis term", "redis exit"]


def test_without_a_mail_server_invitations_go_to_the_console_with_debug_off(tmp_path):
    """`make run` has DEBUG off and no EMAIL_HOST: an invitation is printed, not sent to
    an SMTP server on localhost that refuses the connection."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMAIL_")}
    env.update(DEBUG="0", OVERLAP_VAR_DIR=str(tmp_path), SECRET_KEY=os.environ["SECRET_KEY"],
               PYTHONPATH=f"{ROOT / 'platform'}:{ROOT}",
               DJANGO_SETTINGS_MODULE="overlap.settings")
    send = ("import django; django.setup(); from django.core.mail import send_mail; "
            "send_mail('Invitation', 'Join at /c/token/', 'a@example.org', ['b@example.org'])")
    done = subprocess.run([sys.executable, "-c", send], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "Subject: Invitation" in done.stdout and "Join at /c/token/" in done.stdout
