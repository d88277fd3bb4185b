"""A real stack for fault injection, owned by one test: its own Redis (a redis-server on a
free port, killed and restarted at will), its own database (a fresh PostgreSQL database
next to DATABASE_URL's, else a SQLite file), Celery workers and beat as separate processes,
and optionally the web server. Nobody polls the app: the test reads the runs table with
plain SQL."""

import contextlib
import os
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TERMINAL = ("done", "internal_error")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


def wait_for(predicate, timeout_s: float, every: float = 0.5):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    return predicate()


class Redis:
    def __init__(self, tmp: Path):
        self.binary = shutil.which("redis-server")
        if not self.binary:
            pytest.skip("redis-server is not installed")
        self.port, self.tmp, self.proc = free_port(), tmp, None
        self.bind = ["127.0.0.1"]  # more addresses (a veth's) may be added before start()
        self.password = secrets.token_hex(16)  # as on a network: never without one

    def url_for(self, host: str) -> str:
        return f"redis://:{self.password}@{host}:{self.port}/0"

    @property
    def url(self) -> str:
        return self.url_for("127.0.0.1")

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [self.binary, "--bind", *self.bind, "--port", str(self.port), "--save", "",
             "--appendonly", "no", "--dir", str(self.tmp), "--loglevel", "warning",
             "--requirepass", self.password],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert wait_for(lambda: port_open(self.port), 15), "redis-server did not start"

    def kill(self) -> None:
        """SIGKILL: whatever it held (queued messages) is gone; restarted, it is empty."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        assert wait_for(lambda: not port_open(self.port), 10)


class Database:
    """A fresh database for the stack: PostgreSQL when DATABASE_URL names one, else SQLite."""

    def __init__(self, tmp: Path):
        base = os.environ.get("DATABASE_URL", "")
        self.postgres = base.startswith(("postgres://", "postgresql://"))
        if self.postgres:
            parsed = urllib.parse.urlparse(base)
            self.name = f"{parsed.path.lstrip('/')}_faults_{os.getpid()}"
            self.admin = parsed._replace(path="/postgres").geturl()
            self.url = parsed._replace(path=f"/{self.name}").geturl()
            self._admin(f'DROP DATABASE IF EXISTS "{self.name}"')
            self._admin(f'CREATE DATABASE "{self.name}"')
        else:
            self.path = tmp / "faults.sqlite3"
            self.url = f"sqlite:///{self.path}"

    def _admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(sql)

    def rows(self, sql: str) -> list[tuple]:
        if self.postgres:
            import psycopg

            with psycopg.connect(self.url) as conn:
                return conn.execute(sql).fetchall()
        with sqlite3.connect(self.path, timeout=30) as conn:
            return conn.execute(sql).fetchall()

    def drop(self) -> None:
        if self.postgres:
            self._admin(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


class Stack:
    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.redis = Redis(tmp)
        self.db = Database(tmp)
        self.procs: dict[str, subprocess.Popen] = {}
        self.env = {
            **{k: v for k, v in os.environ.items() if k not in {"DEBUG"}},
            "DATABASE_URL": self.db.url, "REDIS_URL": self.redis.url,
            "SECRET_KEY": secrets.token_urlsafe(50), "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "PYTHONPATH": f"{ROOT / 'platform'}:{ROOT}",
            "DJANGO_SETTINGS_MODULE": "overlap.settings",
            "OVERLAP_SANDBOX_POOL_SIZE": os.environ.get("OVERLAP_SANDBOX_POOL_SIZE", "1"),
            "OVERLAP_VAR_DIR": str(tmp / "var"),
        }

    def manage(self, *args: str, timeout: float = 300) -> str:
        result = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=self.env,
                                capture_output=True, text=True, timeout=timeout)
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout

    def prepare(self) -> None:
        self.manage("migrate", "--noinput", "--verbosity", "0")
        self.manage("sync_content", "--verbosity", "0")

    def start(self, name: str, argv: list[str]) -> subprocess.Popen:
        log = open(self.tmp / f"{name}.log", "ab")  # noqa: SIM115 (closed with the process)
        proc = subprocess.Popen(argv, cwd=ROOT, env=self.env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        self.procs[name] = proc
        return proc

    def start_worker(self, name: str = "worker", concurrency: int = 2, extra_env=None,
                     prefix=()):
        """A Celery worker; `prefix` wraps its command (e.g. `ip netns exec <ns>`)."""
        env_backup = self.env
        self.env = {**self.env, **(extra_env or {})}
        try:
            return self.start(name, [
                *prefix, sys.executable, "-m", "celery", "-A", "overlap", "worker",
                "--loglevel", "INFO", "--queues", "default,authoring,recovery",
                "--concurrency", str(concurrency), "--hostname", f"{name}-{os.getpid()}@%h"])
        finally:
            self.env = env_backup

    def start_beat(self) -> None:
        self.start("beat", [sys.executable, "-m", "celery", "-A", "overlap", "beat",
                            "--loglevel", "INFO", "--schedule", str(self.tmp / "beat-schedule")])

    def start_web(self) -> str:
        port = free_port()
        self.start("web", [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}",
                           "--noreload"])
        assert wait_for(lambda: port_open(port), 60), self.log("web")
        return f"http://127.0.0.1:{port}"

    def kill(self, name: str, sig=signal.SIGKILL) -> None:
        """Kill a process and every process of its session (a worker and its children)."""
        proc = self.procs.pop(name)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        proc.wait(timeout=60)

    def log(self, name: str) -> str:
        path = self.tmp / f"{name}.log"
        return path.read_text(errors="replace")[-6000:] if path.exists() else ""

    def sessions(self, count: int) -> list[str]:
        """Live sessions (tokens) of the async-parameter-server exercise."""
        out = self.manage("shell", "-c", (
            "from django.contrib.auth.models import User\n"
            "from catalog.models import Exercise\n"
            "from interviews import services\n"
            "user, _ = User.objects.get_or_create(username='faults')\n"
            "exercise = Exercise.objects.get(slug='async-parameter-server')\n"
            f"for i in range({count}):\n"
            "    s = services.session_create(interviewer=user, exercise=exercise,\n"
            "        candidate_name=f'C{i}', candidate_email='c@example.org')\n"
            "    services.session_start(session=s)\n"
            "    print('TOKEN', s.token)\n"))
        return [line.split()[1] for line in out.splitlines() if line.startswith("TOKEN ")]

    def click_runs(self, tokens: list[str]) -> None:
        """One candidate Run per session (as the view does: run_create, sent after commit)."""
        self.manage("shell", "-c", (
            "from interviews.models import InterviewSession\n"
            "from catalog.models import Exercise\n"
            "from runs.services import run_create\n"
            "code = Exercise.objects.get(slug='async-parameter-server')"
            ".current_version.files['solution.py']\n"
            f"for token in {tokens!r}:\n"
            "    run_create(session=InterviewSession.objects.get(token=token), code=code,\n"
            "               requested_by='candidate')\n"))

    def runs(self) -> list[tuple]:
        return self.db.rows("SELECT id, status, verdict, attempts, error FROM runs_run "
                            "ORDER BY id")

    def all_finished(self) -> bool:
        runs = self.runs()
        return bool(runs) and all(run[1] in TERMINAL for run in runs)

    def stop(self) -> None:
        for name in list(self.procs):
            self.kill(name, signal.SIGTERM if name != "web" else signal.SIGKILL)
        self.redis.kill()
        self.db.drop()
