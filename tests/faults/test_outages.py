"""Outages users live through, and what a flood or a crash costs, on a real stack (uvicorn
as `runstack` starts it, Channels, Redis, PostgreSQL behind a proxy the test cuts, or
`make run`'s SQLite on a disk the test fills), DEBUG off. Each test prints its figures:

    pytest -m slow tests/faults/test_outages.py -s -q
"""

import asyncio
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

import pytest
from realtime import bench
from websockets.sync.client import connect

from ops.bench_live import Browser
from tests.faults.harness import ROOT, Stack, free_port, wait_for
from tests.faults.outage import (
    PgProxy,
    Typist,
    staffed_session,
    start_uvicorn,
    timed_get,
    timed_post,
)

pytestmark = pytest.mark.slow
OUTAGE_S = 30
PASSWORD = "a-long-interviewer-password-4821"


@pytest.fixture
def pg_stack(tmp_path):
    stack = Stack(tmp_path)
    if not stack.db.postgres:
        stack.db.drop()
        pytest.skip("needs DATABASE_URL to name a PostgreSQL server")
    parsed = urllib.parse.urlparse(stack.db.url)
    proxy = PgProxy(parsed.hostname or "127.0.0.1", parsed.port or 5432)
    proxy.start()
    stack.env["DATABASE_URL"] = proxy.url_for(stack.db.url)
    stack.redis.start()
    stack.prepare()
    yield stack, proxy
    if proxy.listener is None:
        proxy.restore()
    stack.stop()


def _s(seconds: float | None) -> str:
    return "never" if seconds is None else f"{seconds:.2f} s"


def _pad_text(stack: Stack, pk: int) -> str:
    return stack.db.rows(f"SELECT pad_text FROM interviews_interviewsession WHERE id = {pk}")[0][0]


def test_a_database_outage_is_a_clear_503_and_both_sides_type_again_at_once(pg_stack):
    """PostgreSQL unreachable for 30 s while the candidate and the interviewer type: every
    page answers within 2 s with the 503 "temporarily unavailable, your work is kept"
    page; both sockets are typing again within 3 s of the database's return (reconnecting
    as the page does); every acknowledged keystroke is in the pad."""
    stack, proxy = pg_stack
    base = start_uvicorn(stack)
    token, pk = staffed_session(stack, PASSWORD)
    interviewer = Browser(base)
    interviewer.log_in("iv", PASSWORD)
    assert "sessionid" in {c.name for c in interviewer.jar}, "the interviewer is not logged in"
    cookie = "; ".join(f"{c.name}={c.value}" for c in interviewer.jar)
    candidate = Browser(base)
    assert timed_get(candidate, f"/c/{token}/")[0] == 200

    ws = base.replace("http", "ws", 1)
    typists = {"candidate": Typist(f"{ws}/ws/c/{token}/", base, "c"),
               "interviewer": Typist(f"{ws}/ws/sessions/{pk}/", base, "i", cookie=cookie)}
    for typist in typists.values():
        typist.start()
    assert wait_for(lambda: all(t.acked for t in typists.values()), 30), \
        ({k: (t.failures, t.seen, t.n) for k, t in typists.items()}, stack.log("web"))
    time.sleep(1)

    proxy.cut()
    cut_at = time.monotonic()
    visitor = Browser(base)
    assert timed_get(visitor, "/accounts/login/")[0] == 200  # a login form needs no database
    pages = {"candidate page": lambda: timed_get(candidate, f"/c/{token}/"),
             "console": lambda: timed_get(interviewer, f"/sessions/{pk}/"),
             "login": lambda: timed_post(visitor, "/accounts/login/", {
                 "username": "iv", "password": PASSWORD,
                 "csrfmiddlewaretoken": visitor._csrf()})}
    answers = []
    while time.monotonic() - cut_at < OUTAGE_S:
        for name, load in pages.items():
            answers.append((name, *load()))
        time.sleep(2)
    acked_during = {k: [key for at, key in t.acked if at > cut_at + 1]
                    for k, t in typists.items()}
    proxy.restore()
    back_at = time.monotonic()
    time.sleep(8)
    for typist in typists.values():
        typist.stop.set()
        typist.join(timeout=10)

    slowest = max(took for *_, took in answers)
    by_page = {name: max(a[3] for a in answers if a[0] == name) for name in pages}
    again = {k: t.first_ack_after(back_at) for k, t in typists.items()}
    text = _pad_text(stack, pk)
    lost = [key for t in typists.values() for _, key in t.acked if key not in text]
    print(f"\nPostgreSQL outage {OUTAGE_S} s: {len(answers)} page loads during it, slowest "
          f"{slowest:.2f} s ({', '.join(f'{k} {v:.2f}' for k, v in by_page.items())}), "
          f"statuses {sorted({a[1] for a in answers})}; typing again after "
          f"the return: candidate {_s(again['candidate'])}, interviewer "
          f"{_s(again['interviewer'])}; acknowledged keystrokes "
          f"{sum(len(t.acked) for t in typists.values())}, lost {len(lost)}")

    for name, status, body, took in answers:
        assert status == 503, (name, status, body[:300])
        assert "temporarily unavailable" in body and "your work is kept" in body, body[:300]
        assert "Traceback" not in body
        assert took < 2, (name, took)
    assert acked_during == {"candidate": [], "interviewer": []}  # nothing pretended saved
    for side, seconds in again.items():
        assert seconds is not None and seconds < 3, (side, seconds, typists[side].failures[-8:],
                                                     stack.log("web")[-3000:])
    assert not lost, lost
    assert timed_get(candidate, f"/c/{token}/")[0] == 200


@pytest.fixture
def sqlite_on_small_disk(tmp_path, monkeypatch):
    """A stack on SQLite (as `make run`), its database file on a filesystem of its own
    (a 64 MB tmpfs) that the test fills."""

    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(disk)],
                             capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small filesystem here: {mounted.stderr.decode()[:200]}")
    monkeypatch.setenv("DATABASE_URL", "")
    stack = Stack(tmp_path)
    stack.db.path = disk / "overlap.sqlite3"
    stack.db.url = stack.env["DATABASE_URL"] = f"sqlite:///{stack.db.path}"
    stack.env["OVERLAP_HEALTH_NEEDS_WORKER"] = "0"  # the database alone decides here
    stack.redis.start()
    try:
        stack.prepare()
        yield stack, disk
    finally:
        stack.stop()
        (disk / "filler").unlink(missing_ok=True)
        subprocess.run(["umount", "-l", str(disk)], check=False)
        shutil.rmtree(disk, ignore_errors=True)


def _fill(path) -> None:
    """Write to `path` until the filesystem has no byte left."""

    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 20, 4096, 512, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)


def test_sqlite_on_a_full_disk_fails_health_and_answers_a_clear_503(sqlite_on_small_disk):
    """`make run`'s SQLite with its disk full: /healthz says down, and Run, the
    interviewer's notes and the login answer the 503 "temporarily unavailable, your work
    is kept" page, not a plain 500; with space again everything works: the candidate,
    typing all along, is typing again within 3 s, and no acknowledged keystroke is lost."""

    stack, disk = sqlite_on_small_disk
    base = start_uvicorn(stack)
    token, pk = staffed_session(stack, PASSWORD)
    interviewer, candidate, visitor = Browser(base), Browser(base), Browser(base)
    interviewer.log_in("iv", PASSWORD)
    assert timed_get(interviewer, f"/sessions/{pk}/")[0] == 200
    assert timed_get(candidate, f"/c/{token}/")[0] == 200
    assert timed_get(visitor, "/accounts/login/")[0] == 200
    assert timed_get(Browser(base), "/healthz")[0] == 200
    typist = Typist(f"{base.replace('http', 'ws', 1)}/ws/c/{token}/", base, "c")
    typist.start()
    assert wait_for(lambda: typist.acked, 30), typist.failures
    # The write-ahead log keeps the space it once took: emptied, every write needs more.
    with sqlite3.connect(stack.db.path, timeout=30) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    _fill(disk / "filler")

    health = timed_get(Browser(base), "/healthz")
    actions = {
        "run": timed_post(candidate, f"/c/{token}/run/", {"code": "x = 1\n"}),
        "notes": timed_post(interviewer, f"/sessions/{pk}/notes/", {"notes": "strong"}),
        "login": timed_post(visitor, "/accounts/login/", {
            "username": "iv", "password": PASSWORD, "csrfmiddlewaretoken": visitor._csrf()}),
    }
    print(f"\nSQLite, disk full: /healthz {health[0]} {health[1][:80]!r}; " + ", ".join(
        f"{name} {status} in {took:.2f} s" for name, (status, _, took) in actions.items()))
    assert health[0] == 503, health[1][:300]
    for name, (status, body, took) in actions.items():
        assert status == 503, (name, status, body[:300], stack.log("web")[-2000:])
        assert "temporarily unavailable" in body and "your work is kept" in body, body[:300]
        assert took < 2, (name, took)

    (disk / "filler").unlink()
    freed_at = time.monotonic()
    assert timed_get(Browser(base), "/healthz")[0] == 200
    time.sleep(5)
    typist.stop.set()
    typist.join(timeout=10)
    again = typist.first_ack_after(freed_at)
    lost = [key for _, key in typist.acked if key not in _pad_text(stack, pk)]
    print(f"SQLite, space again: the candidate typing again after {_s(again)}; "
          f"acknowledged keystrokes {len(typist.acked)}, lost {len(lost)}")
    assert again is not None and again < 3, typist.failures[-8:]
    assert not lost, lost
    assert timed_post(interviewer, f"/sessions/{pk}/notes/", {"notes": "strong"})[0] == 200
    assert stack.db.rows(f"SELECT notes FROM interviews_interviewsession WHERE id = {pk}") \
        == [("strong",)]


HISTORY = 5000


def _long_history(stack: Stack, pk: int) -> None:
    """A pad with HISTORY one-character updates (as a long interview leaves it)."""
    stack.manage("shell", "-c", (
        "from django.utils import timezone\n"
        "from interviews.models import InterviewSession, PadUpdate\n"
        f"s = InterviewSession.objects.get(pk={pk})\n"
        "now = timezone.now()\n"
        "PadUpdate.objects.bulk_create([PadUpdate(session=s, version=v + 1, client_id='old',\n"
        "    role='candidate', author='Ada', changes=[v, [0, 'x']] if v else [[0, 'x']],\n"
        "    size=12, created_at=now) for v in range(" + str(HISTORY) + ")], batch_size=1000)\n"
        "s.pad_text = 'x' * " + str(HISTORY) + "\n"
        "s.pad_version = " + str(HISTORY) + "\n"
        "s.save(update_fields=['pad_text', 'pad_version'])\n"))


def _flood(url: str, origin: str, stop, counts: dict) -> None:
    """Pull the whole history again and again, as fast as the server answers."""

    try:
        with connect(url, origin=origin, open_timeout=10, max_size=2**24) as ws:
            while not stop.is_set():
                ws.send(json.dumps({"type": "pull", "version": 0}))
                while True:
                    kind = json.loads(ws.recv(timeout=30)).get("type")
                    if kind in ("updates", "refused"):
                        counts[kind] = counts.get(kind, 0) + 1
                        break
    except Exception as exc:  # closed by the server (too many sockets): counted
        counts[type(exc).__name__] = counts.get(type(exc).__name__, 0) + 1


def test_a_pull_flood_barely_slows_another_sessions_keystrokes(pg_stack):
    """One candidate floods the server with pulls of a 5,000-update history from as many
    sockets as it may open; another session's keystrokes (candidate typing 10 keys/s, the
    interviewer's socket receiving them) keep a low p95."""

    stack, _proxy = pg_stack
    base = start_uvicorn(stack)
    bystander, bystander_pk = staffed_session(stack, PASSWORD)
    flooder, flooder_pk = staffed_session(stack, PASSWORD, username="iv2")
    _long_history(stack, flooder_pk)
    interviewer = Browser(base)
    interviewer.log_in("iv", PASSWORD)
    cookie = "; ".join(f"{c.name}={c.value}" for c in interviewer.jar)
    ws = base.replace("http", "ws", 1)

    def typing(seconds: float) -> bench.Result:
        return asyncio.run(bench.run(ws, base, [(bystander, bystander_pk)], cookie,
                                     rate=10, seconds=seconds))

    typing(3)  # warm up
    quiet = typing(15)
    stop, counts = threading.Event(), {}
    floods = [threading.Thread(target=_flood, args=(f"{ws}/ws/c/{flooder}/", base, stop,
                                                    counts)) for _ in range(8)]
    for flood in floods:
        flood.start()
    time.sleep(2)
    flooded = typing(15)
    stop.set()
    for flood in floods:
        flood.join(timeout=60)
    row = {name: (bench.percentile(r.latencies_ms, 0.5), bench.percentile(r.latencies_ms, 0.95),
                  len(r.latencies_ms), r.typed)
           for name, r in (("quiet", quiet), ("flood", flooded))}
    print(f"\nbystander keystroke (candidate -> interviewer), ms p50/p95 (n/typed): quiet "
          f"{row['quiet'][0]:.1f}/{row['quiet'][1]:.1f} ({row['quiet'][2]}/{row['quiet'][3]}); "
          f"during a pull flood of a {HISTORY}-update history from 8 sockets "
          f"{row['flood'][0]:.1f}/{row['flood'][1]:.1f} ({row['flood'][2]}/{row['flood'][3]}); "
          f"flood answers {counts}")
    assert not quiet.errors and not flooded.errors, (quiet.errors, flooded.errors)
    assert row["flood"][2] == row["flood"][3]  # every keystroke arrived
    assert counts.get("refused", 0) > counts.get("updates", 0)  # the flood was throttled
    assert row["flood"][1] < 250, row


def _child_of(parent: int, word: str) -> int | None:

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
    return None


def test_a_killed_web_server_is_healthy_again_within_seconds_under_runstack(tmp_path):
    """`make run`'s stack (runstack: SQLite, its own Redis, a worker, beat, uvicorn): the
    web server SIGKILLed, runstack restarts it, /healthz says ok again within 10 s."""

    port = free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DEBUG", "ALLOWED_HOSTS"}}
    env.update(OVERLAP_VAR_DIR=str(tmp_path), OVERLAP_SECRET_KEY_FILE=str(tmp_path / "key"),
               OVERLAP_BIND=f"127.0.0.1:{port}")
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env,
                   check=True, capture_output=True)
    stack = subprocess.Popen([sys.executable, "manage.py", "runstack", "--redis-port",
                              str(free_port())], cwd=ROOT, env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    health = Browser(f"http://127.0.0.1:{port}")
    try:
        assert wait_for(lambda: timed_get(health, "/healthz")[0] == 200, 90, every=0.5)
        web = _child_of(stack.pid, "uvicorn")
        assert web, "runstack runs no uvicorn"
        os.kill(web, signal.SIGKILL)
        killed = time.monotonic()
        while timed_get(health, "/healthz")[0] == 200 and time.monotonic() - killed < 5:
            time.sleep(0.02)
        healthy = wait_for(lambda: timed_get(health, "/healthz")[0] == 200, 30, every=0.05)
        took = time.monotonic() - killed
    finally:
        stack.send_signal(signal.SIGINT)
        output, _ = stack.communicate(timeout=30)
    print(f"\nrunstack: web server SIGKILLed, /healthz ok again {took:.2f} s later "
          "(runstack's first back-off is 1 s)")
    assert healthy, output[-3000:]
    assert "web exited with status -9; restarting it in 1 s" in output
    assert took < 10, took
